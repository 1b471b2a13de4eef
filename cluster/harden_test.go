package cluster

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Issue 14 item 9: a NaN weight made instanceEqual false for the same
// instance, so every push re-dialled it and closed the invoker in use.
func TestRegistryDirectoryNaNWeightNotRedialled(t *testing.T) {
	for _, w := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		d, dl := newDir(t)
		in := inst("10.0.0.1", 80)
		in.Weight = w
		d.Update([]subscriber.Instance{in})
		d.Update([]subscriber.Instance{in})
		d.Update([]subscriber.Instance{in})
		if n := dl.count(); n != 1 {
			t.Errorf("weight %v: dialled %d times over 3 identical pushes; want 1", w, n)
		}
		if c := dl.dialled[0].closes.Load(); c != 0 {
			t.Errorf("weight %v: invoker in use closed %d times", w, c)
		}
	}
}

// Issue 14 item 10: a DialFunc that panics after others in the same push
// were dialled leaked them (never listed, never closed).
func TestRegistryDirectoryDialPanicNoLeak(t *testing.T) {
	var reported []error
	dl := &dialer{fail: map[string]error{}}
	d, err := NewRegistryDirectory(func(in subscriber.Instance) (Invoker, error) {
		if in.IP == "10.0.0.2" {
			nilMapPanic(nil) // panics: assignment to entry in nil map
		}
		return dl.dial(in)
	}, WithErrorHandler(func(err error) { reported = append(reported, err) }))
	if err != nil {
		t.Fatal(err)
	}
	d.Update([]subscriber.Instance{inst("10.0.0.1", 80), inst("10.0.0.2", 80), inst("10.0.0.3", 80)})
	if got := list(t, d); len(got) != 2 || got[0] != "10.0.0.1:80" || got[1] != "10.0.0.3:80" {
		t.Fatalf("List = %v; want the two instances that dialled", got)
	}
	var de *DialError
	var pe *PanicError
	if len(reported) != 1 || !errors.As(reported[0], &de) || de.Instance.IP != "10.0.0.2" || !errors.As(reported[0], &pe) ||
		pe.Op != "cluster.NewRegistryDirectory dial" || len(pe.Stack) == 0 {
		t.Fatalf("reported %v; want one *DialError for 10.0.0.2 wrapping a *PanicError with a stack", reported)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, iv := range dl.dialled {
		if iv.closes.Load() != 1 {
			t.Errorf("%s closed %d times after dir.Close; want 1", iv.target, iv.closes.Load())
		}
	}
}

// A nil Invoker with a nil error is reported, not silently dropped.
func TestRegistryDirectoryDialNilNil(t *testing.T) {
	var reported []error
	d, err := NewRegistryDirectory(func(subscriber.Instance) (Invoker, error) { return nil, nil },
		WithErrorHandler(func(err error) { reported = append(reported, err) }))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Update([]subscriber.Instance{inst("10.0.0.1", 80)})
	var de *DialError
	if len(reported) != 1 || !errors.As(reported[0], &de) {
		t.Fatalf("reported %v; want one *DialError", reported)
	}
	if _, err := d.List(context.Background(), nil); !errors.Is(err, ErrNoInvokers) {
		t.Fatalf("List = %v; want ErrNoInvokers", err)
	}
}

func TestRegistryDirectoryWaitReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _ := newDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := d.WaitReady(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitReady before any list = %v; want the ctx error", err)
		}
		d.Update(nil) // an empty list is not ready
		select {
		case <-d.ready:
			t.Fatal("ready after an empty push")
		default:
		}
		done := make(chan error)
		go func() { done <- d.WaitReady(context.Background()) }()
		time.Sleep(time.Second)
		d.Update([]subscriber.Instance{inst("10.0.0.1", 80)})
		if err := <-done; err != nil {
			t.Fatalf("WaitReady = %v", err)
		}
		_ = d.Close()
		if err := d.WaitReady(context.Background()); err != nil {
			t.Fatalf("WaitReady after Close of a directory that was ready = %v; want nil", err)
		}
	})
	d2, _ := newDir(t)
	_ = d2.Close()
	if err := d2.WaitReady(context.Background()); !errors.Is(err, errClosed) || !errors.Is(err, rebound.ErrClosed) {
		t.Fatalf("WaitReady of a directory closed before any list = %v; want ErrClosed", err)
	}
}

// nilMapPanic panics with a runtime error (assignment to entry in nil map)
// when given a nil map: the test's stand-in for a bug in user code, passed
// through a parameter so that staticcheck (SA5000) does not flag the
// intentional panic.
func nilMapPanic(m map[string]int) { m["x"] = 1 }
