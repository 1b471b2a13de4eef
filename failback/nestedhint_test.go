package failback

import (
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/cluster"
)

// A failback Invoker whose invoker is another one (a local queue in front
// of a shared one): the not-retried hint is said once, not once per layer.
func TestNotRetriedHintOnceWhenNested(t *testing.T) {
	plain := errors.New("provider said no")
	inner := mustNew(t, cluster.NewStaticDirectory(newProvider("p1", alwaysFail(plain))))
	defer mustClose(t, inner)
	outer := mustNew(t, cluster.NewStaticDirectory(inner))
	defer mustClose(t, outer)
	_, err := outer.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"})
	if !errors.Is(err, plain) || !errors.Is(err, errNotRetryable) {
		t.Fatalf("Invoke = %v; want the provider's error, not retryable", err)
	}
	if n := strings.Count(err.Error(), "failback: not retried"); n != 1 {
		t.Errorf("Invoke's error says the hint %d times, want once: %v", n, err)
	}
}
