package logging_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

// productionLogger is built like zap.NewProduction (JSON, Info, sampling,
// caller, stack traces at Error) but writes to io.Discard.
func productionLogger(lvl zapcore.Level) *zap.Logger {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), lvl)
	core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel))
}

// The hot path: a failing loop's further attempts, logged at Debug, with a
// production (Info) logger. Must not allocate.
func BenchmarkLoopNotifyDebugPath(b *testing.B) {
	lp := logging.NewLoop(productionLogger(zapcore.InfoLevel), "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))
	lp.Failed(1, errBoom, time.Second) // enter the failing state
	e := rebound.Event{Kind: rebound.EventRetry, Attempt: 2, Err: errBoom, Delay: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		lp.Observe(e)
	}
}

func BenchmarkLoopNotifyDebugPathParallel(b *testing.B) {
	lp := logging.NewLoop(productionLogger(zapcore.InfoLevel), "failback", zap.String("target", "10.0.0.7:20880"))
	lp.Failed(1, errBoom, time.Second)
	e := rebound.Event{Kind: rebound.EventRetry, Attempt: 2, Err: errBoom, Delay: time.Second}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			lp.Observe(e)
		}
	})
}

// The same with Debug enabled: every attempt is encoded and written.
func BenchmarkLoopNotifyDebugEnabled(b *testing.B) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.DebugLevel)
	lp := logging.NewLoop(zap.New(core), "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))
	lp.Failed(1, errBoom, time.Second)
	e := rebound.Event{Kind: rebound.EventRetry, Attempt: 2, Err: errBoom, Delay: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		lp.Observe(e)
	}
}

// The cost RedactCore adds to an Info line written by a JSON core.
func BenchmarkRedactCore(b *testing.B) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	plain := zap.New(core)
	red := logging.Redacted(plain)
	clean := []zap.Field{zap.String("key", "DEFAULT_GROUP/orders"), zap.Int("attempt", 3), zap.Duration("delay", time.Second),
		zap.Error(errBoom)}
	sensitive := []zap.Field{zap.String("key", "DEFAULT_GROUP/orders"), zap.String("accessToken", "eyJhbGci"),
		zap.Error(errors.New(`Get "http://nacos:hunter2@host/v1": refused`))}
	for _, bc := range []struct {
		name   string
		l      *zap.Logger
		fields []zap.Field
	}{
		{"plain/clean", plain, clean},
		{"redacted/clean", red, clean},
		{"plain/sensitive", plain, sensitive},
		{"redacted/sensitive", red, sensitive},
		{"redacted/debug-disabled", red, sensitive},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lvl := zapcore.InfoLevel
			if bc.name == "redacted/debug-disabled" {
				lvl = zapcore.DebugLevel
			}
			b.ReportAllocs()
			for b.Loop() {
				if ce := bc.l.Check(lvl, "subscribe failed"); ce != nil {
					ce.Write(bc.fields...)
				}
			}
		})
	}
}

func BenchmarkIsSensitiveKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		logging.IsSensitiveKey("serviceName")
		logging.IsSensitiveKey("X-Auth-Token")
	}
}
