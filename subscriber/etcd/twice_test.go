package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// twoRegs is the model of two Registrations (slots 0 and 1, "A" and "B")
// of one instance key, and what Register's documentation promises about
// them: the last Registration to register holds the key, the other one
// yields; an Update, Close or Shutdown of the one that yields leaves the
// key alone; when the holder lets the key go (Shutdown at once, Close
// when its lease expires), a live other one takes it back with its own
// latest value; with no live one left the key goes.
type twoRegs struct {
	live   [2]bool
	made   [2]bool    // registered once (Shutdown still has a lease to revoke)
	shut   [2]bool    // shut down
	weight [2]float64 // each one's latest value
	holder int        // the slot whose value subscribers see; -1: none
}

type twoRegsOp struct {
	slot int
	kind string // register, update, close, shutdown
}

func (o twoRegsOp) String() string { return string("AB"[o.slot]) + "." + o.kind }

// valid reports whether op can be made in m's state.
func (m *twoRegs) valid(op twoRegsOp) bool {
	switch op.kind {
	case "register":
		return !m.live[op.slot]
	case "update", "close":
		return m.live[op.slot]
	default: // shutdown
		return m.made[op.slot] && !m.shut[op.slot]
	}
}

// apply moves the model; it returns whether the op must leave the key
// untouched (it is made by the one that does not hold the key).
func (m *twoRegs) apply(op twoRegsOp, weight float64) (untouched bool) {
	s, other := op.slot, 1-op.slot
	switch op.kind {
	case "register":
		m.live[s], m.made[s], m.shut[s], m.weight[s], m.holder = true, true, false, weight, s
		return false
	case "update":
		m.weight[s] = weight
		return m.holder != s
	case "close":
		m.live[s] = false
	case "shutdown":
		m.live[s], m.shut[s] = false, true
	}
	if m.holder != s {
		return true
	}
	m.holder = -1
	if m.live[other] {
		m.holder = other
	}
	return false
}

// TestTwoRegistrationsOfOneKey runs every sequence of three operations
// (register again, update, close, shutdown, on either) after two
// Registrations of one instance, and checks after each step what
// subscribers see (a Manager over the Registry) and that an operation of
// the Registration that yields leaves the key untouched.
func TestTwoRegistrationsOfOneKey(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	m := newManager(t, newRegistry(t, cli), subscriber.WithEmptyListHold(0))
	var ops []twoRegsOp
	for s := range 2 {
		for _, k := range []string{"register", "update", "close", "shutdown"} {
			ops = append(ops, twoRegsOp{s, k})
		}
	}
	var seqs [][]twoRegsOp
	var gen func(m twoRegs, seq []twoRegsOp)
	gen = func(mo twoRegs, seq []twoRegsOp) {
		if len(seq) == 3 {
			seqs = append(seqs, seq)
			return
		}
		for _, op := range ops {
			if mo.valid(op) {
				next := mo
				next.apply(op, 0)
				gen(next, append(seq[:len(seq):len(seq)], op))
			}
		}
	}
	start := twoRegs{holder: -1}
	start.apply(twoRegsOp{0, "register"}, 0)
	start.apply(twoRegsOp{1, "register"}, 0)
	gen(start, nil)
	t.Logf("%d sequences", len(seqs))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, seq := range seqs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			runTwoRegs(t, cli, m, i, seq)
		})
	}
	wg.Wait()
}

func runTwoRegs(t *testing.T, cli *clientv3.Client, m *subscriber.Manager, n int, seq []twoRegsOp) {
	name := fmt.Sprint(append([]twoRegsOp{{0, "register"}, {1, "register"}}, seq...))
	key := subscriber.Key{Service: fmt.Sprintf("twice%d", n)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	var rec recorder
	sub, err := m.Subscribe(ctx, key, rec.listener)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	defer sub.Unsubscribe()
	var (
		mo     = twoRegs{holder: -1}
		gs     [2]*etcdreg.Registration
		weight float64
	)
	defer func() {
		for _, g := range gs {
			if g != nil {
				_ = g.Shutdown(context.Background())
			}
		}
	}()
	instKey := ""
	keyState := func() string {
		resp, err := cli.Get(ctx, instKey)
		if err != nil || len(resp.Kvs) == 0 {
			return fmt.Sprint("none ", err)
		}
		return fmt.Sprintf("rev %d lease %x", resp.Kvs[0].ModRevision, resp.Kvs[0].Lease)
	}
	for step, op := range append([]twoRegsOp{{0, "register"}, {1, "register"}}, seq...) {
		weight++
		in := inst("10.0.0.1", 80)
		in.Weight = weight
		before := ""
		if instKey != "" {
			before = keyState()
		}
		var err error
		g := gs[op.slot]
		switch op.kind {
		case "register":
			g, err = etcdreg.RegisterConcrete(ctx, cli, key, in, etcdreg.WithTTL(2*time.Second),
				etcdreg.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
			if err == nil {
				if old := gs[op.slot]; old != nil {
					_ = old.Close()
				}
				gs[op.slot], instKey = g, g.InstanceKey()
			}
		case "update":
			err = g.Update(ctx, in)
		case "close":
			err = g.Close()
		case "shutdown":
			err = g.Shutdown(ctx)
		}
		if err != nil {
			t.Errorf("%s: step %d %v: %v", name, step, op, err)
			return
		}
		if untouched := mo.apply(op, weight); untouched {
			if after := keyState(); after != before {
				t.Errorf("%s: step %d %v by the Registration that yielded changed the key: %s -> %s", name, step, op, before, after)
				return
			}
		}
		want := "(empty)"
		if mo.holder >= 0 {
			want = fmt.Sprintf("10.0.0.1:80 weight %v", mo.weight[mo.holder])
		}
		deadline := time.Now().Add(waitTimeout)
		for got := twoRegsSeen(&rec); got != want; got = twoRegsSeen(&rec) {
			if time.Now().After(deadline) {
				t.Errorf("%s: after step %d %v subscribers see %s, want %s (key: %s)", name, step, op, got, want, keyState())
				return
			}
			time.Sleep(10 * time.Millisecond) // polling a condition on real sockets
		}
	}
}

// twoRegsSeen is the last list delivered, as "ip:port weight w".
func twoRegsSeen(rec *recorder) string {
	all := rec.all()
	if len(all) == 0 {
		return "(nothing yet)"
	}
	last := all[len(all)-1]
	if len(last) == 0 {
		return "(empty)"
	}
	var out []string
	for _, in := range last {
		out = append(out, fmt.Sprintf("%s:%d weight %v", in.IP, in.Port, in.Weight))
	}
	return strings.Join(out, ",")
}
