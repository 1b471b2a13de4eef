package logging_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

// A Loop logs a rebound.Retry loop: a Warn when it starts failing,
// Debug for each further attempt, an Info with the downtime when it
// recovers. (An observer core stands in for a real one so that the output
// is printable; the downtime, measured in real time, is left out.)
func ExampleNewLoop() {
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)

	calls := 0
	subscribe := func(ctx context.Context) error {
		if calls++; calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	}
	policy := rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond, Jitter: rebound.NoJitter}
	err := rebound.Retry(context.Background(), policy, subscribe,
		rebound.WithObserver(logging.NewLoop(logger, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))))
	fmt.Println("Retry:", err)

	for _, e := range logs.All() {
		fields := e.ContextMap()
		delete(fields, "downtime")
		fmt.Println(e.Level.CapitalString(), e.Message, fields)
	}
	// Output:
	// Retry: <nil>
	// WARN retry loop failing map[attempt:1 component:subscriber delay:1ms error:connection refused key:DEFAULT_GROUP@@orders]
	// DEBUG retry attempt failed map[attempt:2 component:subscriber delay:1ms error:connection refused key:DEFAULT_GROUP@@orders]
	// INFO retry loop recovered map[attempts:3 component:subscriber key:DEFAULT_GROUP@@orders]
}

// exampleLogger writes JSON lines without timestamps to stdout.
func exampleLogger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		MessageKey: "msg", LevelKey: "level", NameKey: "logger", EncodeLevel: zapcore.LowercaseLevelEncoder,
	})
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(os.Stdout), zapcore.InfoLevel))
}

func ExampleRedacted() {
	logger := logging.Redacted(exampleLogger())
	err := errors.New(`Post "http://nacos:hunter2@10.0.0.7:8848/nacos/v1/auth/login": connection refused`)
	logger.Warn("login failed",
		zap.String("user", "nacos"),
		zap.String("password", "hunter2"),
		zap.Error(err),
	)
	// Output:
	// {"level":"warn","msg":"login failed","user":"nacos","password":"[REDACTED]","error":"Post \"http://nacos:[REDACTED]@10.0.0.7:8848/nacos/v1/auth/login\": connection refused"}
}
