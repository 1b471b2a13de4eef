package nacos

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/http_agent"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/rebound-go/rebound"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// outageClient is a healthClient whose register requests succeed and
// whose checks fail: the query connection cannot be made (its
// configuration fails), after waiting for release while hold is set.
type outageClient struct {
	healthClient
	hold    atomic.Bool
	release chan struct{}
	once    sync.Once
	queries atomic.Int64 // checks that asked for the query connection
}

// open ends the hold: the checks waiting fail, and the next ones at once.
func (c *outageClient) open() {
	c.once.Do(func() {
		c.hold.Store(false)
		close(c.release)
	})
}

func newOutageClient() *outageClient {
	c := &outageClient{release: make(chan struct{})}
	c.up.Store(true)
	return c
}

func (c *outageClient) RegisterInstance(vo.RegisterInstanceParam) (bool, error) { return true, nil }
func (c *outageClient) GetServerConfig() ([]constant.ServerConfig, error)       { return nil, nil }
func (c *outageClient) GetHttpAgent() (http_agent.IHttpAgent, error)            { return nil, nil }
func (c *outageClient) GetClientConfig() (constant.ClientConfig, error) {
	c.queries.Add(1)
	if c.hold.Load() {
		<-c.release
	}
	return constant.ClientConfig{}, errors.New("no query connection")
}

// TestOutageFailedCheckKeepsSince: a Registration without observers is
// not told of a disconnection; its Status reports repairing since it. A
// check that was under way when the client disconnected and fails after
// the monitor saw it does not move Since: the Registration has been
// repairing since the disconnection, as its Status said (one with
// observers, told at once, keeps it too).
func TestOutageFailedCheckKeepsSince(t *testing.T) {
	c := newOutageClient()
	c.hold.Store(true)
	gi, err := Register(context.Background(), c, subscriber.Key{Service: "outage-since"},
		subscriber.Instance{IP: "10.0.0.1", Port: 8080, Weight: 1, Enabled: true, Healthy: true},
		withCheckInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer gi.Close()
	defer c.open() // before Close, which waits for the check under way
	g := gi.(*registration)
	subscribertest.Eventually(t, 10*time.Second, "the monitor's first call", func() bool { return c.calls.Load() >= 1 })
	subscribertest.Eventually(t, 10*time.Second, "a periodic check to be under way", func() bool { return c.queries.Load() >= 1 })
	c.up.Store(false)
	subscribertest.Eventually(t, 10*time.Second, "the monitor to see the disconnection", g.conn.down.Load)
	before := g.Status()
	if before.State != subscriber.RegistrationRepairing {
		t.Fatalf("Status while disconnected = %+v, want repairing", before)
	}
	c.open() // the check fails now
	// Attempts is recorded once the failure's outcome is (not while registered).
	subscribertest.Eventually(t, 10*time.Second, "the check's failure to be recorded", func() bool { return g.Status().Attempts >= 1 })
	if after := g.Status(); after.State != subscriber.RegistrationRepairing || !after.Since.Equal(before.Since) {
		t.Fatalf("Status after the failed check = %v since %v, want repairing since %v (the disconnection, as reported before)",
			after.State, after.Since, before.Since)
	}
}

// TestOutageSeenByAStartingMonitor: a client that disconnects between a
// Register's request and the first call of the monitor that Register
// starts (the first Registration of the client) is disconnected for its
// Registrations: Status reports repairing, not registered, while it is.
func TestOutageSeenByAStartingMonitor(t *testing.T) {
	c := newOutageClient()
	c.up.Store(false) // the request succeeded; the connection is gone since
	gi, err := Register(context.Background(), c, subscriber.Key{Service: "outage-start"},
		subscriber.Instance{IP: "10.0.0.1", Port: 8080, Weight: 1, Enabled: true, Healthy: true},
		withCheckInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer gi.Close()
	// The monitor's second call follows what its first one saw.
	subscribertest.Eventually(t, 10*time.Second, "the monitor to call ServerHealthy twice", func() bool { return c.calls.Load() >= 2 })
	if st := gi.Status(); st.State != subscriber.RegistrationRepairing {
		t.Fatalf("Status while the client is disconnected = %v since %v, want repairing", st.State, st.Since)
	}
}

// TestOutageStatusDuringTransitions: Status read while the client
// disconnects and comes back, again and again, races with nothing and
// reports registered or repairing, never since a time to come.
func TestOutageStatusDuringTransitions(t *testing.T) {
	c := newOutageClient()
	gi, err := Register(context.Background(), c, subscriber.Key{Service: "outage-race"},
		subscriber.Instance{IP: "10.0.0.1", Port: 8080, Weight: 1, Enabled: true, Healthy: true},
		withCheckInterval(0), withRedoGrace(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer gi.Close()
	g := gi.(*registration)
	subscribertest.Eventually(t, 10*time.Second, "the monitor's first call", func() bool { return c.calls.Load() >= 1 })
	stop := make(chan struct{})
	bad := make(chan subscriber.RegistrationStatus, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Microsecond) // a reader's pace, not a spin
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			st := gi.Status()
			if (st.State != subscriber.RegistrationRegistered && st.State != subscriber.RegistrationRepairing) || st.Since.After(time.Now()) {
				select {
				case bad <- st:
				default:
				}
			}
		}
	}()
	for i := 0; i < 3; i++ {
		c.up.Store(false)
		subscribertest.Eventually(t, 10*time.Second, "the disconnection to be seen", g.conn.down.Load)
		c.up.Store(true)
		subscribertest.Eventually(t, 10*time.Second, "the return to be seen", func() bool { return !g.conn.down.Load() })
	}
	close(stop)
	<-done
	select {
	case st := <-bad:
		t.Fatalf("Status during the transitions = %+v", st)
	default:
	}
}

// TestOutageRegisteredDuringIt: a Registration made while the client's
// monitor holds it disconnected (the SDK reconnected first: its request
// went through) has its periodic check dropped until the monitor sees
// the return, and then checks.
func TestOutageRegisteredDuringIt(t *testing.T) {
	c := newOutageClient()
	key := func(s string) subscriber.Key { return subscriber.Key{Service: s} }
	in := subscriber.Instance{IP: "10.0.0.1", Port: 8080, Weight: 1, Enabled: true, Healthy: true}
	first, err := Register(context.Background(), c, key("outage-first"), in, withCheckInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	h := first.(*registration).h
	subscribertest.Eventually(t, 10*time.Second, "the monitor's first call", func() bool { return c.calls.Load() >= 1 })
	c.up.Store(false)
	subscribertest.Eventually(t, 10*time.Second, "the monitor to see the disconnection", h.conn.down.Load)
	g, err := Register(context.Background(), c, key("outage-during"), in, withCheckInterval(5*time.Millisecond), withRedoGrace(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if st := g.Status(); st.State != subscriber.RegistrationRegistered {
		t.Fatalf("Status of the Registration just made = %+v, want registered (its request went through)", st)
	}
	n := c.queries.Load()
	// Its periodic check falls due many times in the monitor's next
	// second (its next call): none is made.
	calls := c.calls.Load()
	subscribertest.Eventually(t, 10*time.Second, "the monitor's next call", func() bool { return c.calls.Load() > calls })
	if got := c.queries.Load() - n; got != 0 {
		t.Fatalf("%d checks while the monitor held the client disconnected, want 0", got)
	}
	c.up.Store(true)
	subscribertest.Eventually(t, 10*time.Second, "the monitor to see the return", func() bool { return !h.conn.down.Load() })
	subscribertest.Eventually(t, 10*time.Second, "a check after the return", func() bool { return c.queries.Load() > n })
}

// TestOutageMeterOnlyIsTold: a Registration whose only observation is a
// MeterProvider given to WithPolicy (no observer) is told of a
// disconnection at once: its own state, which its instruments report,
// is repairing while the client is down.
func TestOutageMeterOnlyIsTold(t *testing.T) {
	c := newOutageClient()
	gi, err := Register(context.Background(), c, subscriber.Key{Service: "outage-meter"},
		subscriber.Instance{IP: "10.0.0.1", Port: 8080, Weight: 1, Enabled: true, Healthy: true},
		withCheckInterval(0), WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(noop.NewMeterProvider())))
	if err != nil {
		t.Fatal(err)
	}
	defer gi.Close()
	g := gi.(*registration)
	subscribertest.Eventually(t, 10*time.Second, "the monitor's first call", func() bool { return c.calls.Load() >= 1 })
	c.up.Store(false)
	subscribertest.Eventually(t, 10*time.Second, "the monitor to see the disconnection", g.conn.down.Load)
	subscribertest.Eventually(t, 10*time.Second, "its own state to be repairing", func() bool {
		return g.track.State() == subscriber.RegistrationRepairing
	})
}
