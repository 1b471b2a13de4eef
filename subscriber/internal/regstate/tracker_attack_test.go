package regstate

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// TestTrackerCountsSaturate: counts near the top of their 32 bits stop
// there; they never wrap to a negative count.
func TestTrackerCountsSaturate(t *testing.T) {
	tr := New("etcd", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, nil, nil)
	tr.mu.Lock()
	tr.regs, tr.repairs = math.MaxInt32-1, math.MaxInt32-1
	tr.mu.Unlock()
	for range 3 {
		tr.Registered()
		tr.Set(subscriber.RegistrationRepairing, errors.New("lost"))
		tr.Repaired()
	}
	tr.Set(subscriber.RegistrationRepairing, errors.New("lost"))
	tr.SetAttempts(math.MaxInt)
	st := tr.Status()
	if st.Registrations != math.MaxInt32 || st.Repairs != math.MaxInt32 || st.Attempts != math.MaxInt32 {
		t.Fatalf("Registrations %d, Repairs %d, Attempts %d; want each %d", st.Registrations, st.Repairs, st.Attempts, math.MaxInt32)
	}
}

// TestTrackerUnderConcurrentUse: a Tracker's events, recorded by many
// goroutines while others read Status (and its observers read it too),
// reach each observer as a chain (each change starts where the last one
// ended), and its times compare with time.Now as users compare them: not
// in the future, Since not before the event's At. Run with -race.
func TestTrackerUnderConcurrentUse(t *testing.T) {
	var (
		mu    sync.Mutex
		tr    *Tracker
		last  = subscriber.RegistrationState(0)
		chain = true
		n     int
	)
	hooks := registrationHooks{StateChanged: func(c regStateChange) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if c.From != last {
			chain = false
		}
		last = c.To
		if tr != nil {
			_ = tr.Status()
			_ = tr.InObserver()
		}
	}}
	tr = New("nacos", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, []rebound.Observer{hooks}, nil)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 500 {
				switch (i + j) % 4 {
				case 0:
					tr.Registered()
				case 1:
					tr.Set(subscriber.RegistrationRepairing, errors.New("lost"))
				case 2:
					tr.Attempt(OpCheck, time.Now(), errors.New("refused"))
				default:
					tr.Repaired()
				}
				tr.SetAttempts(j)
			}
		})
	}
	wg.Go(func() {
		for range 2000 {
			st := tr.Status()
			now := time.Now()
			if st.Since.After(now) || st.LastErrAt.After(now) || time.Since(st.Since) < 0 {
				t.Errorf("Status times in the future: Since %v, LastErrAt %v, now %v", st.Since, st.LastErrAt, now)
				return
			}
		}
	})
	wg.Wait()
	st := tr.Status()
	mu.Lock()
	defer mu.Unlock()
	if !chain || n < 2 || last != st.State {
		t.Fatalf("%d changes, chained %v, last %v; Status's state %v", n, chain, last, st.State)
	}
	if st.Since.Before(start.Truncate(0)) || st.LastErrAt.IsZero() {
		t.Fatalf("Since %v before the start %v, or no LastErrAt (%v)", st.Since, start, st.LastErrAt)
	}
}
