package failback

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

func TestLogging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if c.inv.Method == "late" {
				return "ok", nil
			}
			return nil, errRefused
		})
		f := mustNew(t, cluster.NewStaticDirectory(p), WithLogger(zap.New(core)), WithMaxTasks(1),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(2)))

		// One queued, four refused: the queue-full episode is logged once at
		// Warn, then at Debug.
		for range 5 {
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"})
		}
		full := logs.FilterField(zap.String("event", "queue_full")) // a snapshot
		if n := full.FilterMessage("retry loop failing").FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
			t.Errorf("%d queue-full Warn lines, want 1: %v", n, full.All())
		}
		if n := full.FilterMessage("retry attempt failed").FilterLevelExact(zapcore.DebugLevel).Len(); n != 3 {
			t.Errorf("%d queue-full Debug lines, want 3", n)
		}

		// The queued call gives up after its retry: one Warn with the task.
		time.Sleep(time.Hour)
		synctest.Wait()
		gave := logs.FilterMessage("failback: gave up on call")
		if gave.Len() != 1 {
			t.Fatalf("%d give-up lines, want 1: %v", gave.Len(), logs.All())
		}
		e := gave.All()[0]
		fields := e.ContextMap()
		if e.Level != zapcore.WarnLevel || fields["method"] != "Notify" || fields["attempts"] != int64(2) ||
			fields["component"] != "failback" || fields["target"] != "a:1" {
			t.Errorf("give-up line %v %v", e.Level, fields)
		}

		// A call queued again ends the episode, at Info.
		_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"})
		full = logs.FilterField(zap.String("event", "queue_full"))
		if n := full.FilterMessage("retry loop recovered").FilterLevelExact(zapcore.InfoLevel).Len(); n != 1 {
			t.Errorf("%d queue-full recovery lines, want 1: %v", n, logs.All())
		}
		if n := logs.FilterMessage("failback: call queued for retry").FilterLevelExact(zapcore.DebugLevel).Len(); n != 2 {
			t.Errorf("%d queued Debug lines, want 2", n)
		}

		// Close drops the queued call at Warn.
		mustClose(t, f)
		drop := logs.FilterMessage("failback: dropped queued call")
		if drop.Len() != 1 || drop.All()[0].Level != zapcore.WarnLevel || drop.All()[0].ContextMap()["reason"] != "closed" {
			t.Errorf("drop lines %v", drop.All())
		}
		for _, e := range logs.All() {
			if e.ContextMap()["component"] != "failback" {
				t.Errorf("line without component=failback: %v %v", e.Message, e.ContextMap())
			}
		}
	})
}
