package regstate

import (
	"errors"
	"strings"
	"testing"

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
	hooks := subscriber.RegistrationHooks{
		StateChanged: func(c subscriber.RegistrationStateChange) {
			if tr == nil { // the first event comes from New
				got = append(got, c.To.String())
				return
			}
			got = append(got, c.To.String()+"/"+tr.Status().State.String())
			if c.To == subscriber.RegistrationRepairing {
				tr.Attempt(subscriber.RegistrationOpCheck, c.At, errors.New("x")) // queued, called after this hook
				panic("hook panic")
			}
		},
		Attempted: func(a subscriber.RegistrationAttempt) { got = append(got, a.Op) },
	}
	tr = New("test", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, hooks, nil)
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
	for _, s := range subscriber.RegistrationStates() {
		names = append(names, s.String())
	}
	if got := strings.Join(names, ","); got != "registering,registered,repairing,deregistering,stopped" {
		t.Fatalf("RegistrationStates = %s", got)
	}
}
