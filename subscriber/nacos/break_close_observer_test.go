package nacos_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestBreakCloseFromObserver: a Registration's observer can close it. It
// used to be unable to close it: the observer runs inside a step of the repair loop, and Close
// waits for that step to end, so Close never returns and the loop never
// ends. Correct: Close called from an observer returns without waiting for
// the step it is called from (as subscriber's and failback's Close do), and
// the Registration then stops. The scenario runs in a test process of its
// own: while the defect lasts, it leaves a goroutine that never ends, which
// the other tests' goroutine checks would see.
func TestBreakCloseFromObserver(t *testing.T) {
	if !inChildProcess(t) {
		return
	}
	srv := newServer(t)
	c := newClient(t, srv)
	var reg atomic.Pointer[subscriber.Registration]
	entered, returned := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var closeErr error // written before returned is closed
	obs := rebound.WithObserver(registrationHooks{StateChanged: func(e regStateChange) {
		g := reg.Load()
		if e.To != subscriber.RegistrationRepairing || g == nil {
			return
		}
		once.Do(func() {
			close(entered)
			closeErr = (*g).Close()
			close(returned)
		})
	}})
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		append(fastRegisterWith(obs), nacos.WithCheckInterval(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	reg.Store(&g)
	closedFromObserver(t, srv, g, "the observer to see repairing", entered, returned, &closeErr)
}

// closedFromObserver checks a Close called from an observer of g: once g
// made its first check, its instance is dropped from srv; the repair's
// event reaches the observer (entered, named what), whose Close returns
// (returned, then closeErr) an error matching rebound.ErrCalledFromCallback
// without waiting for itself, and g stops.
func closedFromObserver(t *testing.T, srv *nacostest.Server, g subscriber.Registration, what string, entered, returned <-chan struct{}, closeErr *error) {
	t.Helper()
	t.Cleanup(func() {
		select {
		case <-returned:
			_ = g.Close()
		default: // Close would wait for the step that never ends
		}
	})
	subscribertest.Eventually(t, e2eTimeout, "a first check", func() bool {
		return srv.Stats().Requests[nacostest.RequestServiceQuery] > 0
	})
	if n := srv.ForgetClientInstances("", "", "orders", "10.0.0.1", 8080); n != 1 {
		t.Fatalf("ForgetClientInstances = %d", n)
	}
	for _, w := range []struct {
		what string
		ch   <-chan struct{}
	}{{what, entered}, {"Close called from the observer to return", returned}} {
		subscribertest.Eventually(t, e2eTimeout, w.what, func() bool {
			select {
			case <-w.ch:
				return true
			default:
				return false
			}
		})
	}
	if !errors.Is(*closeErr, rebound.ErrCalledFromCallback) {
		t.Fatalf("Close from the observer = %v, want an error matching rebound.ErrCalledFromCallback", *closeErr)
	}
	subscribertest.Eventually(t, e2eTimeout, "the Registration to stop", func() bool {
		return g.Status().State == subscriber.RegistrationStopped
	})
}

// childTestEnv names, in a child process, the test it runs.
const childTestEnv = "NACOS_TEST_CHILD"

// inChildProcess reports whether t runs in a test process of its own. If
// not, it runs t's test in one (at most 4 minutes), fails t if that
// fails, and returns false. A scenario that, while its defect lasts,
// leaves goroutines that never end runs there.
func inChildProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childTestEnv) == t.Name() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), childTestEnv+"="+t.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the scenario failed (%v):\n%s", err, out)
	}
	return false
}
