package regstate

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// fakeWork is a Work whose attempts return the errors queued in results
// (nil once they run out).
type fakeWork struct {
	track    *Tracker
	rt       *rebound.Retrier
	mu       sync.Mutex // guards the fields below (the test reads them)
	results  []error
	attempts int
	down     bool
	final    error // Final's error
	stopping bool
	pause    bool
}

func (w *fakeWork) Tracker() *Tracker                { return w.track }
func (w *fakeWork) Logger(zapcore.Level) *zap.Logger { return zap.NewNop() }
func (w *fakeWork) Retrier() *rebound.Retrier        { return w.rt }
func (w *fakeWork) Final(err error) bool             { return w.final != nil && errors.Is(err, w.final) }
func (w *fakeWork) Stopping() bool                   { return w.stopping }
func (w *fakeWork) Pause() bool                      { return w.pause }
func (w *fakeWork) Up() bool                         { w.mu.Lock(); defer w.mu.Unlock(); return !w.down }
func (w *fakeWork) count() int                       { w.mu.Lock(); defer w.mu.Unlock(); return w.attempts }
func (w *fakeWork) setDown(d bool)                   { w.mu.Lock(); w.down = d; w.mu.Unlock() }
func (w *fakeWork) queue(errs ...error) {
	w.mu.Lock()
	w.results = append(w.results, errs...)
	w.mu.Unlock()
}
func (w *fakeWork) Attempt() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts++
	if len(w.results) == 0 {
		return nil
	}
	err := w.results[0]
	w.results = w.results[1:]
	return err
}

// stateLog records a registration's state changes.
type stateLog struct {
	mu  sync.Mutex
	got []regStateChange
}

func (l *stateLog) hooks() registrationHooks {
	return registrationHooks{StateChanged: func(c regStateChange) {
		l.mu.Lock()
		l.got = append(l.got, c)
		l.mu.Unlock()
	}}
}

// want fails unless the changes recorded are want (From, To and Reason).
func (l *stateLog) want(t *testing.T, want []regStateChange) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := len(l.got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		g, w := l.got[i], want[i]
		ok = g.From == w.From && g.To == w.To && errors.Is(g.Reason, w.Reason) && (g.Reason == nil) == (w.Reason == nil)
	}
	if !ok {
		t.Fatalf("state changes = %+v, want %+v", l.got, want)
	}
}

// last is the last change recorded.
func (l *stateLog) last() regStateChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got[len(l.got)-1]
}

// repairRig is a registration's Loop driving a Repair, as the adapters
// do: the timer posts a step that makes the attempt due.
type repairRig struct {
	w    *fakeWork
	log  stateLog
	loop Loop
	r    Repair
}

func newRepairRig(t *testing.T, opts ...rebound.Option) *repairRig {
	t.Helper()
	rt, err := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	g := new(repairRig)
	track := New("test", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 80}, []rebound.Observer{g.log.hooks()}, nil)
	track.Registered()
	g.w = &fakeWork{track: track, rt: rt}
	g.loop.Init(g.r.End, track)
	g.r.Init(NewSched(), func(gen uint32) {
		g.loop.Post(func() bool { return !g.r.Fired(gen) || g.r.Due(g.w) })
	})
	return g
}

// due makes the run's attempt now, in a step (as etcd's kick does).
func (g *repairRig) due(t *testing.T) bool {
	t.Helper()
	res := make(chan bool, 1)
	if !g.loop.Post(func() bool { ok := g.r.Due(g.w); res <- ok; return ok }) {
		t.Fatal("the loop has ended")
	}
	return <-res
}

// run reports, from a step, whether a run is under way and waits.
func (g *repairRig) run() (running, waiting bool) {
	g.do(func() { running, waiting = g.r.Running(), g.r.Waiting() })
	return running, waiting
}

// do runs f in a step and waits for it.
func (g *repairRig) do(f func()) {
	done := make(chan struct{})
	g.loop.Post(func() bool { f(); close(done); return true })
	<-done
}

var errRepair = rebound.Transient(errors.New("repair failed"))

// TestRepairRetriesUntilRepaired: a failed attempt moves to repairing
// with its error and its count, the next one comes after the policy's
// delay on the timer, and a success ends the run registered.
func TestRepairRetriesUntilRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRepairRig(t)
		g.w.queue(errRepair, errRepair)
		start := time.Now()
		if !g.due(t) {
			t.Fatal("Due stopped on a transient error")
		}
		st := g.w.track.Status()
		if running, waiting := g.run(); st.State != subscriber.RegistrationRepairing || st.Attempts != 1 || !waiting || !running {
			t.Fatalf("after a failure: state %v attempts %d waiting %v running %v; want repairing, 1, waiting, running",
				st.State, st.Attempts, waiting, running)
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if n := g.w.count(); n != 2 {
			t.Fatalf("attempts after the first delay = %d, want 2", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		st = g.w.track.Status()
		running, waiting := g.run()
		if n := g.w.count(); n != 3 || st.State != subscriber.RegistrationRegistered || st.Attempts != 0 || running || waiting {
			t.Fatalf("after the success: %d attempts, state %v, Attempts %d, running %v, waiting %v; want 3, registered, 0, no run",
				n, st.State, st.Attempts, running, waiting)
		}
		if d := time.Since(start); d != 2*time.Second+time.Millisecond {
			t.Fatalf("repaired after %v, want two delays of 1s", d)
		}
		want := []regStateChange{
			{From: 0, To: subscriber.RegistrationRegistering},
			{From: subscriber.RegistrationRegistering, To: subscriber.RegistrationRegistered},
			{From: subscriber.RegistrationRegistered, To: subscriber.RegistrationRepairing, Reason: errRepair},
			{From: subscriber.RegistrationRepairing, To: subscriber.RegistrationRegistered},
		}
		g.log.want(t, want)
		g.loop.Stop()
		<-g.loop.Done()
	})
}

// TestRepairWaitsForUpWhileDown: a failure while the connection is down
// arms no timer; Up restarts a waiting run from the policy's start.
func TestRepairWaitsForUpWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRepairRig(t)
		g.w.queue(errRepair, errRepair, errRepair)
		g.due(t)
		g.w.setDown(true)
		time.Sleep(time.Second + time.Millisecond) // the retry, which fails while down
		synctest.Wait()
		if _, waiting := g.run(); g.w.count() != 2 || !waiting {
			t.Fatalf("attempts %d, waiting %v; want 2, waiting", g.w.count(), waiting)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := g.w.count(); n != 2 {
			t.Fatalf("attempts while down = %d, want none after the failure (no timer)", n)
		}
		var up, waiting bool
		g.do(func() { up, waiting = g.r.Up(), g.r.Waiting() })
		if !up || waiting {
			t.Fatalf("Up = %v (waiting %v), want true: the run waits for it", up, waiting)
		}
		g.w.setDown(false)
		g.due(t) // fails: the first delay again
		if st := g.w.track.Status(); st.Attempts != 1 {
			t.Fatalf("Attempts after Up and a failure = %d, want 1 (the run starts again)", st.Attempts)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if running, _ := g.run(); g.w.count() != 4 || running {
			t.Fatalf("attempts %d, running %v; want the retry after the first delay repaired (4 attempts)", g.w.count(), running)
		}
		var again bool
		g.do(func() { again = g.r.Up() })
		if again {
			t.Fatal("Up = true with no run waiting")
		}
		g.loop.Stop()
		<-g.loop.Done()
	})
}

// TestRepairFinalStops: a final error stops the registration at once,
// reported with it; a stop while the registration stops is not reported.
func TestRepairFinalStops(t *testing.T) {
	g := newRepairRig(t)
	g.w.final = errors.New("closed")
	g.w.queue(g.w.final)
	if g.due(t) {
		t.Fatal("Due went on after a final error")
	}
	<-g.loop.Done()
	if c := g.log.last(); c.To != subscriber.RegistrationStopped || !errors.Is(c.Reason, g.w.final) || g.r.Running() {
		t.Fatalf("last change %+v, running %v; want stopped with the final error, no run", c, g.r.Running())
	}

	g = newRepairRig(t)
	g.w.stopping = true
	g.w.queue(rebound.Permanent(errors.New("denied")))
	if g.due(t) {
		t.Fatal("Due went on after a permanent error")
	}
	if st := g.w.track.Status(); st.State != subscriber.RegistrationRepairing {
		t.Fatalf("state %v after a stop while stopping, want repairing (not reported stopped)", st.State)
	}
}

// TestRepairStopAtAdmission: a limiter that can never grant stops the
// registration, or pauses the run when the Work says so; End gives back
// the token a waiting attempt holds.
func TestRepairStopAtAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, pause := range []bool{false, true} {
			lim := rate.NewLimiter(rate.Every(time.Hour), 1)
			g := newRepairRig(t, rebound.WithLimiter(lim))
			g.w.pause = pause
			g.w.queue(errRepair)
			g.due(t) // the first attempt takes no token; it fails
			lim.SetBurst(0)
			ok := g.due(t)
			st := g.w.track.Status()
			var running, waiting bool
			if ok {
				running, waiting = g.run()
			}
			switch {
			case !pause && (ok || st.State != subscriber.RegistrationStopped):
				t.Fatalf("no pause: Due = %v, state %v; want false, stopped", ok, st.State)
			case pause && (!ok || !running || !waiting || st.State != subscriber.RegistrationRepairing):
				t.Fatalf("pause: Due = %v, running %v, waiting %v, state %v; want a paused run", ok, running, waiting, st.State)
			}
			if n := g.w.count(); n != 1 {
				t.Fatalf("attempts = %d, want 1 (nothing sent while the limiter grants nothing)", n)
			}
			g.loop.Stop()
			<-g.loop.Done()
		}

		lim := rate.NewLimiter(rate.Every(time.Hour), 1)
		g := newRepairRig(t, rebound.WithLimiter(lim))
		g.w.queue(errRepair, errRepair)
		g.due(t)                    // a first attempt: no token
		time.Sleep(time.Second + 1) // the retry takes the token, and fails
		synctest.Wait()
		time.Sleep(time.Second + 1) // the next retry waits for a token, reserved
		synctest.Wait()
		if n := g.w.count(); n != 2 || lim.Tokens() > -0.5 {
			t.Fatalf("attempts %d, tokens %.2f; want 2 and a token reserved", n, lim.Tokens())
		}
		g.loop.Stop()
		<-g.loop.Done()
		if tok := lim.Tokens(); tok < -0.01 {
			t.Fatalf("tokens after End = %.2f, want the reserved one given back", tok)
		}
	})
}

// TestRepairEndedWhileWaitingStartsAnew: a failed run that the adapter
// ends (its work was done otherwise) while it waits neither fires nor
// keeps waiting: no run is under way, and the next Due starts a run that
// makes its attempt at once.
func TestRepairEndedWhileWaitingStartsAnew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRepairRig(t)
		g.w.queue(errRepair)
		g.due(t)
		g.do(g.r.End)
		if running, waiting := g.run(); running || waiting {
			t.Fatalf("after End: running %v, waiting %v; want no run", running, waiting)
		}
		time.Sleep(2 * time.Second) // past the ended run's delay
		synctest.Wait()
		if n := g.w.count(); n != 1 {
			t.Fatalf("attempts after End = %d, want 1 (the ended run's retry must not fire)", n)
		}
		if !g.due(t) {
			t.Fatal("Due stopped")
		}
		if running, waiting := g.run(); g.w.count() != 2 || running || waiting {
			t.Fatalf("after a new Due: %d attempts, running %v, waiting %v; want 2, no run (registered)", g.w.count(), running, waiting)
		}
		g.loop.Stop()
		<-g.loop.Done()
	})
}
