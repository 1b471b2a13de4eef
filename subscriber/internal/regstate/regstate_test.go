package regstate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
	"github.com/rebound-go/rebound/subscriber"
)

// TestHooksOutsideLockInOrder: a hook may call Status (it would deadlock
// under the lock), events arrive in order even when a hook records a new
// one, and a panicking hook does not stop later ones.
func TestHooksOutsideLockInOrder(t *testing.T) {
	var (
		tr  *Tracker
		got []string
	)
	hooks := registrationHooks{
		StateChanged: func(c regStateChange) {
			if tr == nil { // the first event comes from New
				got = append(got, c.To.String())
				return
			}
			got = append(got, c.To.String()+"/"+tr.Status().State.String())
			if c.To == subscriber.RegistrationRepairing {
				tr.Attempt(OpCheck, c.At, errors.New("x")) // queued, called after this hook
				panic("hook panic")
			}
		},
		Attempted: func(a regAttempt) { got = append(got, a.Op) },
	}
	tr = New("test", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, []rebound.Observer{hooks}, nil)
	tr.Registered()
	tr.Set(subscriber.RegistrationRepairing, errors.New("lost"))
	tr.Repaired()
	tr.Set(subscriber.RegistrationStopped, nil)
	tr.Set(subscriber.RegistrationRegistered, nil) // ignored once stopped
	want := "registering registered/registered repairing/repairing check registered/registered stopped/stopped"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("hook calls = %q, want %q", s, want)
	}
	st := tr.Status()
	if st.Registrations != 1 || st.Repairs != 1 || st.LastErr == nil || st.State != subscriber.RegistrationStopped {
		t.Fatalf("Status = %+v", st)
	}
}

func TestStatesOrderedAndNamed(t *testing.T) {
	var names []string
	for s := subscriber.RegistrationRegistering; s <= subscriber.RegistrationStopped; s++ {
		names = append(names, s.String())
	}
	if got := strings.Join(names, ","); got != "registering,registered,repairing,deregistering,stopped" {
		t.Fatalf("RegistrationState values = %s", got)
	}
}

// TestMetrics: the registration reports its state (1 for the current
// one), its requests by op and result, and its repairs; once stopped it
// unregisters (reports nothing).
func TestMetrics(t *testing.T) {
	reader, mp := telemetrytest.NewProvider()
	tr := New("nacos", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, nil, nil)
	if err := tr.StartMetrics(mp); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tr.Attempt(OpRegister, start, nil)
	tr.Registered()
	tr.Attempt(OpCheck, start, errors.New("down"))
	tr.Attempt(OpCheck, start, nil)
	tr.Set(subscriber.RegistrationRepairing, nil)
	tr.Attempt(OpRegister, start, nil)
	tr.Repaired()
	v := telemetrytest.Read(t, reader).Values
	want := map[string]map[string]int64{
		telemetry.RegistrationRegistrations: {
			"registry=nacos,state=registered": 1, "registry=nacos,state=repairing": 0, "registry=nacos,state=registering": 0,
			"registry=nacos,state=deregistering": 0, "registry=nacos,state=stopped": 0},
		telemetry.RegistrationRepairs: {"registry=nacos": 1},
	}
	for name, vals := range want {
		for attrs, n := range vals {
			if got := v[name][attrs]; got != n {
				t.Errorf("%s{%s} = %d, want %d", name, attrs, got, n)
			}
		}
	}
	reqs := v[telemetry.RegistrationRequests]
	for attrs, n := range map[string]int64{
		"op=register,registry=nacos,result=success":   2,
		"op=check,registry=nacos,result=failure":      1,
		"op=check,registry=nacos,result=success":      1,
		"op=deregister,registry=nacos,result=success": 0,
	} {
		if got := reqs[attrs]; got != n {
			t.Errorf("requests{%s} = %d, want %d (all: %v)", attrs, got, n, reqs)
		}
	}
	tr.Set(subscriber.RegistrationStopped, nil)
	if v := telemetrytest.Read(t, reader).Values; len(v[telemetry.RegistrationRegistrations]) != 0 {
		t.Fatalf("a stopped registration still reports %v", v[telemetry.RegistrationRegistrations])
	}
}

// TestAttemptsAreTheSchedules: Status.Attempts is the count the repair's
// Schedule gives (SetAttempts), not a count of failed requests kept here:
// a failed Update or check outside a repair run does not move it, and
// moving to registered clears it.
func TestAttemptsAreTheSchedules(t *testing.T) {
	tr := New("etcd", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, nil, nil)
	start := time.Now()
	tr.Registered()
	tr.Attempt(OpUpdate, start, errors.New("update refused"))
	if st := tr.Status(); st.Attempts != 0 || st.LastErr == nil {
		t.Fatalf("after a failed update: Attempts %d (want 0: no repair runs), LastErr %v (want the error)", st.Attempts, st.LastErr)
	}
	tr.Set(subscriber.RegistrationRepairing, errors.New("lost"))
	for n := 1; n <= 3; n++ {
		tr.Attempt(OpRegister, start, errors.New("down"))
		tr.SetAttempts(n)
		if got := tr.Status().Attempts; got != n {
			t.Fatalf("after the Schedule counted %d: Attempts %d", n, got)
		}
	}
	tr.Repaired()
	if got := tr.Status().Attempts; got != 0 {
		t.Fatalf("registered again: Attempts %d, want 0", got)
	}
}

// TestNoAttemptsWhileRegistered: a Schedule's count given while
// registered (a check deferred by a local refusal, then admitted and
// successful: the state does not move) is not shown: Attempts is 0 when
// registered.
func TestNoAttemptsWhileRegistered(t *testing.T) {
	tr := New("nacos", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, nil, nil)
	tr.Registered()
	tr.SetAttempts(2)
	tr.Set(subscriber.RegistrationRegistered, nil)
	if st := tr.Status(); st.State != subscriber.RegistrationRegistered || st.Attempts != 0 {
		t.Fatalf("Status = %+v, want registered with Attempts 0", st)
	}
	tr.Set(subscriber.RegistrationRepairing, errors.New("lost"))
	tr.SetAttempts(3)
	if got := tr.Status().Attempts; got != 3 {
		t.Fatalf("repairing: Attempts %d, want the Schedule's 3", got)
	}
}

// TestDeregisteringStartsItsOwnCount: Shutdown during a failing repair
// starts a new run, the deregistration's: Attempts does not carry the
// repair's count into deregistering (nor, when the first deregister
// succeeds, into stopped).
func TestDeregisteringStartsItsOwnCount(t *testing.T) {
	tr := New("nacos", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, nil, nil)
	tr.Registered()
	tr.Set(subscriber.RegistrationRepairing, errors.New("lost"))
	tr.SetAttempts(5)
	tr.Set(subscriber.RegistrationDeregistering, nil)
	if got := tr.Status().Attempts; got != 0 {
		t.Fatalf("deregistering: Attempts %d, want 0 (the repair's 5 belong to another run)", got)
	}
	tr.Set(subscriber.RegistrationStopped, nil)
	if got := tr.Status().Attempts; got != 0 {
		t.Fatalf("stopped after a first deregister that succeeded: Attempts %d, want 0", got)
	}
}

// TestLapse: a disconnection learnt of late moves a registration
// registered before it to repairing as of its time; one registered
// since, in another state, or with observers (told at once) is left.
func TestLapse(t *testing.T) {
	newTracker := func(obs []rebound.Observer) *Tracker {
		tr := New("nacos", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, obs, nil)
		tr.Registered()
		return tr
	}
	tr := newTracker(nil)
	since := tr.Status().Since
	tr.Lapse(since.Add(-time.Second)) // registered since: left
	if st := tr.Status(); st.State != subscriber.RegistrationRegistered || !st.Since.Equal(since) {
		t.Fatalf("after a lapse before the registration: %+v, want registered since %v", st, since)
	}
	at := since.Add(time.Second)
	tr.Lapse(at)
	if st := tr.Status(); st.State != subscriber.RegistrationRepairing || !st.Since.Equal(at) {
		t.Fatalf("after a lapse: %+v, want repairing since %v", st, at)
	}
	tr.Set(subscriber.RegistrationDeregistering, nil)
	tr.Lapse(at.Add(time.Hour))
	if st := tr.Status(); st.State != subscriber.RegistrationDeregistering {
		t.Fatalf("after a lapse while deregistering: %+v, want deregistering", st)
	}
	var events int
	tr = newTracker([]rebound.Observer{rebound.ObserverFunc(func(rebound.Event) { events++ })})
	before := events
	tr.Lapse(time.Now().Add(time.Hour))
	if st := tr.Status(); st.State != subscriber.RegistrationRegistered || events != before {
		t.Fatalf("a Tracker with observers after a lapse: %+v, %d events, want registered, no event", st, events-before)
	}
}
