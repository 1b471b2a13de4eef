package subscriber_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// fakeRegistration records when it was shut down.
type fakeRegistration struct {
	key  subscriber.Key
	err  error
	log  *drainLog
	down bool
}

type drainLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *drainLog) add(s string) {
	l.mu.Lock()
	l.steps = append(l.steps, s)
	l.mu.Unlock()
}

func (f *fakeRegistration) Key() subscriber.Key           { return f.key }
func (f *fakeRegistration) Instance() subscriber.Instance { return subscriber.Instance{} }
func (f *fakeRegistration) Status() subscriber.RegistrationStatus {
	return subscriber.RegistrationStatus{Key: f.key}
}
func (f *fakeRegistration) Update(context.Context, subscriber.Instance) error { return nil }
func (f *fakeRegistration) Close() error                                      { return nil }
func (f *fakeRegistration) Shutdown(context.Context) error {
	f.log.add("deregister " + f.key.Service + "@" + time.Now().Format("05.000"))
	f.down = true
	return f.err
}

// TestDrainOrder: deregister every registration, then wait the full
// wait, then stop; a failed deregistration still stops and is returned.
func TestDrainOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &drainLog{}
		a := &fakeRegistration{key: subscriber.Key{Service: "a"}, log: log}
		b := &fakeRegistration{key: subscriber.Key{Service: "b"}, log: log, err: errors.New("unreachable")}
		start := time.Now()
		var stoppedAfter time.Duration
		err := subscriber.Drain(context.Background(), 2*time.Second, func(context.Context) error {
			stoppedAfter = time.Since(start)
			if !a.down || !b.down {
				t.Error("stop ran before every registration was deregistered")
			}
			return nil
		}, a, nil, b)
		if stoppedAfter != 2*time.Second {
			t.Fatalf("stop ran %v after the start, want after the 2 s wait", stoppedAfter)
		}
		if err == nil || !strings.Contains(err.Error(), "deregister b: unreachable") {
			t.Fatalf("Drain = %v, want b's deregistration error", err)
		}
		if len(log.steps) != 2 {
			t.Fatalf("steps = %v", log.steps)
		}
	})
}

// TestDrainContextCutsTheWait: a ctx done during the wait skips the rest
// of it, and stop still runs (with the done ctx).
func TestDrainContextCutsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		stopped := false
		err := subscriber.Drain(ctx, time.Hour, func(ctx context.Context) error {
			stopped = true
			return ctx.Err()
		}, &fakeRegistration{key: subscriber.Key{Service: "a"}, log: &drainLog{}})
		if !stopped || time.Since(start) != time.Second {
			t.Fatalf("stopped %v after %v, want stop after 1 s", stopped, time.Since(start))
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Drain = %v, want stop's DeadlineExceeded", err)
		}
	})
}

func TestDrainBadInput(t *testing.T) {
	stop := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		wait time.Duration
		stop func(context.Context) error
		arg  string
	}{
		{"nil ctx", nil, 0, stop, "ctx"},
		{"nil stop", context.Background(), 0, nil, "stop"},
		{"negative wait", context.Background(), -time.Second, stop, "wait"},
	} {
		err := subscriber.Drain(tc.ctx, tc.wait, tc.stop)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("%s: Drain = %v, want an ArgumentError naming %s", tc.name, err, tc.arg)
		}
	}
}

// nilReg is a Registration whose nil pointer panics when used, as the
// adapters' do.
type nilReg struct{ key subscriber.Key }

func (r *nilReg) Key() subscriber.Key                               { return r.key }
func (r *nilReg) Instance() subscriber.Instance                     { return subscriber.Instance{} }
func (r *nilReg) Status() subscriber.RegistrationStatus             { return subscriber.RegistrationStatus{} }
func (r *nilReg) Update(context.Context, subscriber.Instance) error { return nil }
func (r *nilReg) Shutdown(context.Context) error                    { _ = r.key; return nil }
func (r *nilReg) Close() error                                      { return nil }

// TestDrainSkipsTypedNilRegistration: a typed-nil Registration (a
// *nacos.Registration variable left nil because Register failed) is
// skipped like a nil one, instead of panicking in Drain's goroutine and
// crashing the process.
func TestDrainSkipsTypedNilRegistration(t *testing.T) {
	var failed *nilReg
	stopped := false
	err := subscriber.Drain(context.Background(), 0, func(context.Context) error { stopped = true; return nil }, failed, nil)
	if err != nil || !stopped {
		t.Fatalf("Drain = %v, stopped %v; want nil, true", err, stopped)
	}
}
