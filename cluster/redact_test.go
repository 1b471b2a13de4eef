package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/cluster"
)

// TestBreakerLogsScrubCredentials: a target whose URL carries a user and
// password reaches the breaker's log lines without the password.
func TestBreakerLogsScrubCredentials(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	const target = "http://svc:s3cret@10.0.0.2:8080"
	inner := cluster.NewStaticDirectory(&addrInvoker{addr: "10.0.0.1:8080"}, down{addr: target})
	dir, err := cluster.NewBreakerDirectory(inner,
		cluster.WithLogger(zap.New(core)),
		cluster.WithBreakerSettings(func(string) gobreaker.Settings {
			return gobreaker.Settings{ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 }}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	ctx, inv := context.Background(), &cluster.Invocation{Method: "Notify"}
	ivs, err := dir.List(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	for _, iv := range ivs {
		if iv.Target() == target {
			_, _ = iv.Invoke(ctx, inv)
		}
	}
	if len(dir.Open()) != 1 {
		t.Fatalf("open breakers: %v, want the failing target's", dir.Open())
	}
	opened := false
	for _, e := range logs.All() {
		line := e.Message + " " + fieldText(e.ContextMap())
		if strings.Contains(line, "s3cret") {
			t.Errorf("a log line carries the password: %s", line)
		}
		if strings.Contains(e.Message, "breaker opened") && strings.Contains(line, "svc:") {
			opened = true
		}
	}
	if !opened {
		t.Fatalf("no \"breaker opened\" line naming the target's user; lines: %v", logs.All())
	}
}

// fieldText renders a log entry's fields as one string.
func fieldText(m map[string]any) string { return fmt.Sprint(m) }
