package failback

import (
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// A nil *cluster.RegistryDirectory in the interface used to be accepted,
// and every Invoke then ran into it.
func TestNewNilPointerDirectory(t *testing.T) {
	var dir *cluster.RegistryDirectory
	fb, err := New(dir)
	if fb != nil {
		fb.Close()
	}
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "failback.New: dir is a nil pointer") {
		t.Fatalf("New = %v, want an *ArgumentError naming dir", err)
	}
}

// A plain errors.New is not retryable by default: the call used to come
// back with the bare error, nothing saying it was not retried, nor why.
func TestNotRetryableErrorSaysWhy(t *testing.T) {
	plain := errors.New("provider said no")
	p := newProvider("p1", alwaysFail(plain))
	fb := mustNew(t, cluster.NewStaticDirectory(p))
	defer mustClose(t, fb)
	_, err := fb.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"})
	if !errors.Is(err, plain) {
		t.Fatalf("Invoke = %v; want it to wrap the attempt's error", err)
	}
	for _, want := range []string{"provider said no", "not retried", "not classified retryable", "rebound.Transient", "WithRetryable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Invoke's error %q does not say %q", err, want)
		}
	}
	if s := fb.Stats(); s.Offered != 0 {
		t.Fatalf("Stats = %+v; the call must not be queued", s)
	}
	// A Permanent error is the caller's own decision: returned as it is.
	perm := rebound.Permanent(errors.New("bad request"))
	p2 := newProvider("p2", alwaysFail(perm))
	fb2 := mustNew(t, cluster.NewStaticDirectory(p2))
	defer mustClose(t, fb2)
	if _, err := fb2.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"}); err != perm {
		t.Fatalf("Invoke = %v; want the Permanent error unchanged", err)
	}
}
