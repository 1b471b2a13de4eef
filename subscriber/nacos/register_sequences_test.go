package nacos_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// seqStep is one step of a registration sequence: register or a rejected
// register of an address (a new Registration), or close, shutdown or
// update of the Registration made by step reg.
type seqStep struct {
	op   string // "register", "reject", "close", "shutdown", "update"
	addr string // register, reject
	reg  int    // close, shutdown, update: the Registration's index
}

// seqModel is what the docs promise the server lists: the instance of
// the Registration that last registered the service on the client (the
// owner), until a Shutdown deregisters it; Close leaves it; a rejected
// Register leaves the owner's; a Registration whose instance was
// replaced deregisters nothing.
type seqModel struct {
	addr   []string  // by Registration
	state  []string  // "live", "closed", "shut"
	weight []float64 // registered weight
	holder int       // the live Registration (-1: none): others are refused
	owner  int       // whose instance the connection holds (-1: none)
}

func (m seqModel) clone() seqModel {
	m.addr, m.state, m.weight = slices.Clone(m.addr), slices.Clone(m.state), slices.Clone(m.weight)
	return m
}

// apply applies s; false if the step is refused or changes nothing.
func (m *seqModel) apply(s seqStep) bool {
	switch s.op {
	case "register":
		if m.holder >= 0 {
			return false
		}
		m.addr, m.state, m.weight = append(m.addr, s.addr), append(m.state, "live"), append(m.weight, 1)
		m.holder, m.owner = len(m.addr)-1, len(m.addr)-1
	case "reject":
		return m.holder < 0
	case "close":
		if m.state[s.reg] != "live" {
			return false
		}
		m.state[s.reg], m.holder = "closed", -1
	case "shutdown":
		switch m.state[s.reg] {
		case "live":
			m.holder = -1
		case "closed":
		default:
			return false
		}
		m.state[s.reg] = "shut"
		if m.owner == s.reg {
			m.owner = -1
		}
	case "update":
		if m.state[s.reg] != "live" {
			return false
		}
		m.weight[s.reg]++
	}
	return true
}

// listed is what the server should list: "ip/weight" or nothing.
func (m seqModel) listed() []string {
	if m.owner < 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s/%v", m.addr[m.owner], m.weight[m.owner])}
}

// sequences enumerates every sequence of depth steps that each change
// the model, starting with address A (B's are the same by symmetry).
func sequences(depth int) [][]seqStep {
	var out [][]seqStep
	var walk func(m seqModel, seq []seqStep)
	walk = func(m seqModel, seq []seqStep) {
		if len(seq) == depth {
			out = append(out, slices.Clone(seq))
			return
		}
		var steps []seqStep
		for _, a := range []string{"10.0.0.1", "10.0.0.2"} {
			if len(seq) == 0 && a != "10.0.0.1" {
				continue
			}
			steps = append(steps, seqStep{op: "register", addr: a}, seqStep{op: "reject", addr: a})
		}
		for i := range m.addr {
			steps = append(steps, seqStep{op: "close", reg: i}, seqStep{op: "shutdown", reg: i}, seqStep{op: "update", reg: i})
		}
		for _, s := range steps {
			n := m.clone()
			if n.apply(s) {
				walk(n, append(seq, s))
			}
		}
	}
	walk(seqModel{holder: -1, owner: -1}, nil)
	return out
}

func describe(seq []seqStep, m seqModel) string {
	var b strings.Builder
	for i, s := range seq {
		if i > 0 {
			b.WriteString(", ")
		}
		if s.addr != "" {
			fmt.Fprintf(&b, "%s %s", s.op, s.addr)
		} else {
			fmt.Fprintf(&b, "%s #%d(%s)", s.op, s.reg, m.addr[s.reg])
		}
	}
	return b.String()
}

// TestRegistrationSequences: two Registrations of one service on one
// client, in every order of register, rejected register, close,
// shutdown and update up to four steps (each sequence on a service of
// its own): after each step the server lists what the docs promise.
func TestRegistrationSequences(t *testing.T) {
	srv := newServer(t)
	c := rejectingClient(srv, newClient(t, srv), "")
	for n, seq := range sequences(4) {
		key := subscriber.Key{Service: fmt.Sprintf("seq%d", n)}
		m := seqModel{holder: -1, owner: -1}
		var regs []subscriber.Registration
		for i, s := range seq {
			var err error
			switch s.op {
			case "register":
				var g subscriber.Registration
				g, err = nacos.Register(context.Background(), c, key, inst(s.addr, 8080), fastRegister...)
				regs = append(regs, g)
			case "reject":
				c.armed.Store(true)
				if _, rerr := nacos.Register(context.Background(), c, key, inst(s.addr, 8080), fastRegister...); !errors.Is(rerr, nacos.ErrRejected) {
					err = fmt.Errorf("rejected Register = %v, want ErrRejected", rerr)
				}
			case "close":
				err = regs[s.reg].Close()
			case "shutdown":
				err = regs[s.reg].Shutdown(context.Background())
			case "update":
				in := regs[s.reg].Instance()
				in.Weight++
				err = regs[s.reg].Update(context.Background(), in)
			}
			m.apply(s)
			what := describe(seq[:i+1], m)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want := m.listed()
			var got []string
			ok := waitFor(e2eTimeout, func() bool {
				got = nil
				for _, in := range srv.Instances("", "", key.Service) {
					got = append(got, fmt.Sprintf("%s/%v", in.Ip, in.Weight))
				}
				return slices.Equal(got, want)
			})
			if !ok {
				t.Fatalf("%s: the server lists %v, want %v", what, got, want)
			}
		}
		for _, g := range regs {
			_ = g.Close()
		}
		for _, g := range regs {
			if err := g.Shutdown(context.Background()); err != nil {
				t.Fatalf("%s, then Shutdown of every one: %v", describe(seq, m), err)
			}
		}
		if got := srv.Instances("", "", key.Service); len(got) != 0 {
			t.Fatalf("%s, then Close and Shutdown of every one: the server lists %+v", describe(seq, m), got)
		}
	}
}

// waitFor polls cond until it holds (true) or d has passed (false).
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
