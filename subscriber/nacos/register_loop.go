package nacos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/sat"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// Work the loop has to do.
const (
	needNothing  int8 = iota
	needCheck         // ask the server whether it lists the instance
	needRegister      // register it again
)

// sched runs the due times of every Registration of the process.
var sched = regstate.NewSched()

// startLoop starts the repair loop: one timer on the shared scheduler
// and steps on a regstate.Loop, so that a waiting Registration costs no
// goroutine.
func (g *registration) startLoop() {
	g.rep.up = true
	g.loop.Init(g.rep.run.End, &g.track)
	g.rep.run.Init(sched, g.fire)
	g.loop.Do(func() bool { g.armPeriodic(); return true })
}

// fire runs on the scheduler's goroutine when the timer is due: it posts
// the periodic check, or the repair's attempt. While the client is
// disconnected it drops the call: a Registration is not told of a
// disconnection (hub.broadcast), or keeps its periodic check's timer
// armed through it (Repair.Down), and the connection's return begins a
// check after the grace (connected), which arms the timer again.
func (g *registration) fire(gen uint32) {
	if g.conn.down.Load() {
		return
	}
	g.loop.Post(func() bool {
		r := &g.rep
		switch {
		case !r.run.Fired(gen):
			return true
		case r.need == needNothing:
			if r.up {
				r.need = needCheck
				g.begin(0)
			}
			return true
		}
		return g.due()
	})
}

// connection tells the loop of a connection transition; the latest one
// wins over one not yet handled.
func (g *registration) connection(up bool) {
	g.connUp.Store(up)
	if g.connNew.Swap(true) {
		return
	}
	g.loop.Do(func() bool {
		g.connNew.Store(false)
		g.connected(g.connUp.Load())
		return true
	})
}

// repairer is the loop's state (owned by the loop's steps): the shared
// repair state machine, and what nacos adds to it (the work due, the
// judgement of the checks).
type repairer struct {
	need int8
	up   bool
	j    judgement
	// run is the repair run; while there is nothing to do (need is
	// needNothing), its timer waits for the periodic check.
	run regstate.Repair
}

// armPeriodic waits for the periodic check, if any.
func (g *registration) armPeriodic() {
	var d time.Duration
	if g.cfg.check > 0 {
		d = jitter(g.cfg.check, 0.75, 1.25)
	}
	g.rep.run.Idle(d)
}

// begin starts a repair run whose first attempt is due after d (a grace,
// not a backoff): the Schedule admits it when it is due.
func (g *registration) begin(d time.Duration) { g.rep.run.Begin(g.cfg.retrier, d) }

// eager reports whether g is told of a disconnection at once (its
// observers and meters show it), not lazily (hub.broadcast).
func (g *registration) eager() bool { return len(g.cfg.obs) > 0 || g.cfg.meter != nil }

// connected handles a connection transition.
func (g *registration) connected(up bool) {
	r := &g.rep
	r.up = up
	if r.need == needNothing {
		r.need = needCheck
	}
	if !up {
		r.run.Down() // the check, or the repair, waits for the connection
		set := func() bool {
			g.track.Set(subscriber.RegistrationRepairing, errNotConnected)
			return true
		}
		if len(g.cfg.obs) == 0 {
			set()
			return
		}
		// The observers hear of it on a step's goroutine: this one may be
		// the monitor's, which a slow observer would keep from the
		// client's other Registrations.
		g.loop.Post(set)
		return
	}
	// Give the SDK's redo time to register the instance, then look for
	// the evidence.
	g.begin(jitter(g.cfg.grace, 1, 1.5))
}

// updateStep sends u and, if the server took it, checks after the grace:
// a re-send by the SDK's redo that raced the update (its copy taken
// before) would put the old values back, and an Update abandoned by its
// caller left its values with the server (the check registers the
// registered instance again).
func (g *registration) updateStep(u regUpdate) {
	sent, err := g.update(u)
	u.done <- err
	if sent {
		g.updated()
	}
}

// updated runs after the server took an Update's request.
func (g *registration) updated() {
	r := &g.rep
	r.j.news() // new values: a difference is news again
	if r.up && r.need == needNothing {
		r.need = needCheck
		g.begin(jitter(g.cfg.grace, 1, 1.5))
	}
}

// due runs when the timer fires; false: stop for good.
func (g *registration) due() bool {
	r := &g.rep
	if !r.run.Running() || !r.up || r.need == needNothing {
		return true // nothing to do (attempt would do nothing either)
	}
	// The attempt is due: the Schedule admits it (the gates of its kind:
	// WithPolicy's options), or says how long to wait (a limiter
	// token: the same attempt; a local refusal's backoff: then a retry),
	// or stops the loop.
	if !r.run.Due((*work)(g)) {
		return false
	}
	if !r.run.Running() {
		g.armPeriodic() // registered: the run is over
	}
	return true
}

// work is a registration as the repair state machine's regstate.Work
// (its methods are not the Registration's).
type work registration

// Attempt does the pending work: a check, a registration, or both.
func (w *work) Attempt() error {
	g := (*registration)(w)
	r := &g.rep
	in := g.current()
	var err error
	if r.need == needCheck {
		var found, same bool
		if found, same, err = g.listed(regstate.OpCheck, in); err == nil {
			r.need = r.j.judge(g, in, found, same)
		}
	}
	if err == nil && r.need == needRegister {
		if err = g.register(regstate.OpRegister, in); err == nil {
			err = r.j.confirm(g, in)
		}
		switch {
		case err == nil:
			g.logger().Info("registered again")
			g.track.Registered()
			// Registered before the repair is counted, so that a Status
			// showing the repair shows it registered.
			g.track.Set(subscriber.RegistrationRegistered, nil)
			g.track.Repaired()
			r.need = needNothing
		case errors.Is(err, errNotListed):
			r.need = needCheck // the Schedule's backoff, then look again
		}
	}
	if err != nil {
		g.lapse() // before the outcome moves it to repairing
	}
	return err
}

// lapse moves g, not told of the disconnection the client is in (no
// observers or meters), to repairing as of the disconnection if it is
// registered since before it, as its Status reports it: a failed attempt
// then does not move Since to the failure.
func (g *registration) lapse() {
	if g.conn.down.Load() && !g.eager() {
		g.track.Lapse(time.Unix(0, g.conn.downAt.Load()))
	}
}

// The rest of regstate.Work. A closed client, or a server that cannot
// list instances, stops the registration at once. No limit applies and
// refusals defer (compileRegisterRetrier): only a limiter that can never
// grant a token (its burst set to 0) stops an admission, and a
// registration never stops on it: the run pauses (nothing is sent until
// the limiter grants). While disconnected, the run waits for the
// connection (connected stops its timer and starts it again).

func (w *work) Tracker() *regstate.Tracker { return &w.track }
func (w *work) Logger(lvl zapcore.Level) *zap.Logger {
	if !w.cfg.log.Core().Enabled(lvl) {
		return nil
	}
	return (*registration)(w).logger()
}
func (w *work) Retrier() *rebound.Retrier { return w.cfg.retrier }
func (w *work) Up() bool                  { return w.rep.up && !w.conn.down.Load() }
func (w *work) Stopping() bool            { return false }
func (w *work) Pause() bool               { return true }
func (w *work) Final(err error) bool {
	return errors.Is(err, errClosed) || errors.Is(err, errLookupUnsupported)
}

// judgement is what the loop learned from its checks, so that it does
// not fight the server at every check.
type judgement struct {
	// other: the instance was registered again because the server
	// listed it with other values; if it does again at a later check
	// (before an Update), they are the server's (an operator's weight,
	// another client's copy of the address), and registering again
	// would only fight them at every check.
	other bool
	left  bool // the other values were left (logged once)
	// unlisted: registered again because the server did not list it.
	unlisted bool
	// hidden: the last such registration was not listed right after it
	// either. Once is a server (or a cluster's other node) that has not
	// caught up; twice in a row, the instance is hidden (see confirm).
	hidden bool
}

// news forgets the other values (an Update sent new ones).
func (j *judgement) news() { j.other, j.left, j.hidden = false, false, false }

// judge returns the work a check's answer (found, same) calls for.
func (j *judgement) judge(g *registration, in model.Instance, found, same bool) int8 {
	j.unlisted = false
	switch {
	case found && (same || j.other):
		j.hidden = false
		switch {
		case !same && !j.left:
			g.logger().Warn("the server lists the instance with other values (weight, enabled or metadata) after registering it again; leaving them")
			j.left = true
		case same && g.debug() && g.track.State() == subscriber.RegistrationRepairing:
			g.logger().Debug("the server lists the instance (the SDK's redo worked)")
		}
		if same {
			// other stays: a server that took the values back and then
			// lists others again (two clients taking the address from
			// each other) is not fought either.
			j.left = false
		}
		return needNothing
	case found:
		g.logger().Info("the server lists the instance with other values (weight, enabled or metadata); registering it again")
		g.track.Set(subscriber.RegistrationRepairing, errNotListed)
		j.other = true
		return needRegister
	case !in.Enable:
		// The server's query leaves disabled instances out: there is
		// nothing to compare.
		return needNothing
	}
	g.logger().Info("the server does not list the instance; registering it again")
	g.track.Set(subscriber.RegistrationRepairing, errNotListed)
	j.unlisted = true
	return needRegister
}

// confirm asks the server again after registering an instance it did not
// list. A first miss is a server that has not caught up (the query's
// connection may reach another node of a cluster): the next check tells.
// A second miss in a row means the server hides it (an operator disabled
// it: Nacos keeps that apart from the registration, and its query leaves
// disabled instances out) or lost it again: the repair failed, and the
// Schedule's backoff paces the next one, not the check interval.
func (j *judgement) confirm(g *registration, in model.Instance) error {
	if !j.unlisted {
		return nil
	}
	j.unlisted = false
	found, _, err := g.listed(regstate.OpCheck, in)
	if err != nil || found {
		j.hidden = false
		return nil // registered; the next check tells more
	}
	if !j.hidden {
		j.hidden = true
		return nil
	}
	return opError("register", g.Key(), fmt.Errorf("%w right after registering it again, twice in a row (an operator's disable hides it, or it was lost again)", errNotListed))
}

// update sends u's instance (in a step of the loop) and adopts it unless
// Update gave up on it; sent: the server accepted the request.
func (g *registration) update(u regUpdate) (sent bool, err error) {
	if err := u.ctx.Err(); err != nil {
		return false, err
	}
	if err := g.register(regstate.OpUpdate, u.inst); err != nil {
		return false, err
	}
	if !u.state.CompareAndSwap(updatePending, updateAdopted) {
		return true, u.ctx.Err() // Update returned ctx's error: keep the previous instance
	}
	g.mu.Lock()
	g.track.ShareInstance(u.sub)
	g.sent = nil // the registered instance now
	g.mu.Unlock()
	return true, nil
}

// sameRegistered reports whether the server's instance x carries what
// in registered: its weight, enabled flag and metadata (the server may
// add metadata keys of its own).
func sameRegistered(x, in model.Instance) bool {
	if x.Weight != in.Weight || x.Enable != in.Enable {
		return false
	}
	for k, v := range in.Metadata {
		if x.Metadata[k] != v {
			return false
		}
	}
	return true
}

// clusterName is the cluster Nacos gives an instance registered with c.
func clusterName(c string) string {
	if c == "" {
		return defaultCluster
	}
	return c
}

// jitter returns d scaled by a random factor in [lo, hi), saturated (a
// huge d stays huge).
func jitter(d time.Duration, lo, hi float64) time.Duration {
	return sat.Mul(d, lo+rand.Float64()*(hi-lo))
}

// Update changes the registered instance (weight, metadata, enabled,
// healthy): one register request with the new instance, which Nacos
// applies in place (its connection's instance of the service is
// replaced), checked against the server after the redo grace (a re-send
// of the old instance by the SDK's redo racing the Update is then
// registered over). It returns once the server accepted it, or the error (a
// "nacos: update ..." error, wrapping ErrRejected for a rejection). After a
// failed Update the Registration keeps reporting and repairing the
// previous instance, but the server and the SDK's redo cache may hold
// either until an Update succeeds. The address and cluster must not change (another instance:
// Register it), a *rebound.ArgumentError, as is a bad Weight or one that
// Register refuses (Enabled, Healthy and Weight all zero). After
// Shutdown or Close it returns an error matching
// rebound.ErrClosed. The SDK's call is not cancelled by
// ctx (it is bounded by the client's TimeoutMs); ctx bounds the wait for
// it.
func (g *registration) Update(ctx context.Context, inst subscriber.Instance) error {
	const fn = "nacos.Registration.Update"
	if ctx == nil {
		return &rebound.ArgumentError{Func: fn, Arg: "ctx", Reason: "must not be nil"}
	}
	cur := g.Instance()
	switch {
	case inst.IP != cur.IP || inst.Port != cur.Port || clusterName(inst.Cluster) != clusterName(cur.Cluster):
		return &rebound.ArgumentError{Func: fn, Arg: "inst", Reason: fmt.Sprintf(
			"must keep the address and cluster %s:%d/%q (another one is another instance: Register it); got %s:%d/%q",
			cur.IP, cur.Port, cur.Cluster, inst.IP, inst.Port, inst.Cluster)}
	case inst.Weight < 0 || math.IsNaN(inst.Weight) || math.IsInf(inst.Weight, 0):
		return &rebound.ArgumentError{Func: fn, Arg: "inst.Weight", Reason: fmt.Sprintf("must be a finite number >= 0; got %v", inst.Weight)}
	}
	if err := regstate.CheckRegistrable(fn, inst); err != nil {
		return err
	}
	inst.Ephemeral, inst.ID = true, ""
	inst = regstate.CloneInstance(inst) // the one copy
	u := regUpdate{ctx: ctx, inst: toModel(inst), sub: inst, done: make(chan error, 1), state: new(atomic.Int32)}
	stopped := opErr("update", g.Key(), regstate.ErrStopped)
	if err := ctx.Err(); err != nil {
		return err
	}
	if g.track.InObserver() {
		// From an observer of the Registration: on the goroutine of the
		// step calling it, which a posted Update would wait for, or of
		// Shutdown once the loop ended. The request is made here; the
		// loop's follow-up (the check after the grace) is posted.
		select {
		case <-g.loop.Done():
			return stopped
		default:
		}
		sent, err := g.update(u)
		if sent {
			g.loop.Post(func() bool { g.updated(); return true })
		}
		return err
	}
	if !g.loop.Post(func() bool { g.updateStep(u); return true }) {
		return stopped
	}
	select {
	case err := <-u.done:
		return err
	case <-g.loop.Done():
		select {
		case err := <-u.done:
			return err
		default:
			return stopped // the loop ended before it took the Update
		}
	case <-ctx.Done():
		if u.state.CompareAndSwap(updatePending, updateAbandoned) {
			return ctx.Err()
		}
		return <-u.done // adopted just now: the loop is sending its result
	}
}
