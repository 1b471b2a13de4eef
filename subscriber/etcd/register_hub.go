package etcd

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// sched runs the due times (keep-alives, repair waits) of every
// Registration of the process.
var sched = regstate.NewSched()

// hubRetry is how long a hub waits before it opens a broken keep-alive
// stream or watch again (clientv3's lessor waits as long).
const hubRetry = 500 * time.Millisecond

// hubs holds, per client, what the client's Registrations share.
var hubs = struct {
	mu sync.Mutex
	m  map[*clientv3.Client]*hub
}{m: map[*clientv3.Client]*hub{}}

// hub is what a client's Registrations share: one goroutine watching the
// connection, one keep-alive stream for all their leases (one goroutine
// reading its answers), one watch per service prefix (one goroutine
// each). A Registration is entries here and timers of sched: no goroutine
// of its own.
//
// Why a stream of our own: clientv3's Lease.KeepAlive keeps one stream
// too, but starts a goroutine per leased channel; KeepAliveOnce opens a
// stream per request. The requests and answers are the same as
// clientv3's: one request per lease every third of its TTL, on a stream
// that requires a leader, and a lease that has not been answered for a
// TTL is probed (TimeToLive), as when clientv3 closes its channel.
//
// While the stream is down, a keep-alive waits for an answer on a new one
// (parked), or for its TTL's end. Once the hub knows no stream can
// answer (the connection left Ready, or a new stream failed too), the
// first keep-alive that parks has the hub park every lease at once
// (hold: one pass moving each keep-alive's timer to its TTL's end): an
// outage then costs no wake-up per keep-alive falling due, only the probe
// at each TTL's end; one that ends before any falls due costs nothing.
type hub struct {
	client *clientv3.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	up     atomic.Bool // the connection is ready, as the watcher last saw

	// Under hubs.mu.
	regs    map[*registration]struct{}
	watches map[string]*prefixWatch

	smu sync.Mutex // one Send at a time on the stream

	lmu    sync.Mutex
	stream pb.Lease_LeaseKeepAliveClient // nil: none open
	leases map[clientv3.LeaseID]*registration
	parked map[*registration]struct{} // a send failed: waits for an answer on a stream
	down   bool                       // no stream can answer (see markDown), none answered since
	held   bool                       // every lease of leases is parked too (hold)
	holdc  chan struct{}              // hold is due: for keepAliveStream
}

// joinHub adds g to client's hub (started with the first Registration).
func joinHub(client *clientv3.Client, g *registration) *hub {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h := hubs.m[client]
	if h == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h = &hub{client: client, ctx: ctx, cancel: cancel,
			regs: map[*registration]struct{}{}, watches: map[string]*prefixWatch{},
			leases: map[clientv3.LeaseID]*registration{}, parked: map[*registration]struct{}{},
			holdc: make(chan struct{}, 1)}
		h.up.Store(true)
		hubs.m[client] = h
		h.wg.Add(2)
		go h.watchConn()
		go h.keepAliveStream()
	}
	h.regs[g] = struct{}{}
	return h
}

// leave removes g (its lease, its key's watch: what setLease and
// joinWatch added); the last Registration
// below a prefix stops its watch, the last of the client stops the hub.
// wait waits for the goroutines stopped: leave runs where the loop ends,
// which may be a goroutine of the hub.
func (h *hub) leave(g *registration, lease clientv3.LeaseID, prefix, key string, watched bool) (wait func()) {
	h.lmu.Lock()
	if h.leases[lease] == g {
		delete(h.leases, lease)
	}
	delete(h.parked, g)
	g.h.kaT.Stop() // again: a hold may have moved it since the loop stopped it
	h.lmu.Unlock()
	var stopped []*prefixWatch
	hubs.mu.Lock()
	if w := h.watches[prefix]; w != nil && watched {
		if rs := w.keys[key]; rs != nil {
			delete(rs, g)
			if len(rs) == 0 {
				delete(w.keys, key)
			}
		}
		if w.refs--; w.refs == 0 {
			delete(h.watches, prefix)
			stopped = append(stopped, w)
		}
	}
	delete(h.regs, g)
	last := len(h.regs) == 0
	if last && hubs.m[h.client] == h {
		delete(hubs.m, h.client)
	}
	hubs.mu.Unlock()
	for _, w := range stopped {
		w.cancel()
	}
	if last {
		h.cancel()
	}
	return func() {
		for _, w := range stopped {
			<-w.done
		}
		if last {
			h.wg.Wait()
		}
	}
}

// watchConn watches the client's connection state until the hub stops:
// a repair that fails while it is not ready waits for it (no timer), and
// every Registration hears when it is ready again.
func (h *hub) watchConn() {
	defer h.wg.Done()
	conn := h.client.ActiveConnection()
	if conn == nil {
		return
	}
	s := conn.GetState()
	h.up.Store(s == connectivity.Ready || s == connectivity.Idle)
	for conn.WaitForStateChange(h.ctx, s) {
		was := s
		s = conn.GetState()
		h.up.Store(s == connectivity.Ready || s == connectivity.Idle)
		if was == connectivity.Ready && s != connectivity.Ready {
			h.markDown() // the stream went with the transport
		}
		if s == connectivity.Ready && was != connectivity.Ready {
			hubs.mu.Lock()
			regs := make([]*registration, 0, len(h.regs))
			for g := range h.regs {
				regs = append(regs, g)
			}
			hubs.mu.Unlock()
			for _, g := range regs {
				g.ready()
			}
		}
	}
}

// keepAlive binds lease id to g (its answers go to g) and forgets old.
func (h *hub) keepAlive(g *registration, old, id clientv3.LeaseID) {
	h.lmu.Lock()
	if h.leases[old] == g {
		delete(h.leases, old)
	}
	h.leases[id] = g
	h.lmu.Unlock()
}

// park parks g when no keep-alive stream is open (true): it waits for
// an answer on a new one.
func (h *hub) park(g *registration) bool {
	h.lmu.Lock()
	defer h.lmu.Unlock()
	if h.stream != nil {
		return false
	}
	h.parkLocked(g)
	return true
}

// parkLocked parks g; the first to park while the stream is down has
// keepAliveStream hold every lease.
func (h *hub) parkLocked(g *registration) {
	h.parked[g] = struct{}{}
	if h.down && !h.held {
		h.held = true
		select {
		case h.holdc <- struct{}{}:
		default:
		}
	}
}

// send sends a keep-alive request for g's lease id. false: no stream
// takes it; g waits (parked) for an answer on a stream that works.
func (h *hub) send(g *registration, id clientv3.LeaseID) bool {
	for {
		h.lmu.Lock()
		s := h.stream
		if s == nil {
			h.parkLocked(g)
			h.lmu.Unlock()
			return false
		}
		h.lmu.Unlock()
		h.smu.Lock()
		err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)})
		h.smu.Unlock()
		if err == nil {
			return true
		}
		h.lmu.Lock()
		if h.stream == s {
			h.stream = nil // broken: the reader opens another one
		}
		h.lmu.Unlock()
	}
}

// keepAliveStream keeps the keep-alive stream open until the hub stops:
// it reads the answers and, when a stream broke, opens another one after
// hubRetry. A new stream is tried with one parked lease; its answer
// wakes the others, so an outage costs one request per hubRetry. A
// stream that failed before any answer (the one opened after a break, or
// the first) marks the hub down. While the connection is neither Ready
// nor Idle no stream is tried (it would fail at once, or wait for the
// connection): the hub is down.
func (h *hub) keepAliveStream() {
	defer h.wg.Done()
	lc := clientv3.RetryLeaseClient(h.client)
	t := time.NewTimer(hubRetry)
	defer t.Stop()
	for {
		if !h.up.Load() {
			h.markDown()
			t.Reset(hubRetry)
			if !h.wait(t) {
				return
			}
			continue
		}
		sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(h.ctx))
		answered := false
		if s, err := lc.LeaseKeepAlive(sctx); err == nil {
			h.lmu.Lock()
			h.stream = s
			probe := h.probeLocked()
			h.lmu.Unlock()
			if probe != 0 {
				h.smu.Lock()
				_ = s.Send(&pb.LeaseKeepAliveRequest{ID: int64(probe)})
				h.smu.Unlock()
			}
			answered = h.recv(s)
			h.lmu.Lock()
			if h.stream == s {
				h.stream = nil
			}
			h.lmu.Unlock()
		}
		cancel()
		if !answered {
			h.markDown()
		}
		t.Reset(hubRetry)
		if !h.wait(t) {
			return
		}
	}
}

// markDown records that no stream can answer until one does: the
// connection left Ready, or a stream failed before any answer. The next
// keep-alive that parks has the hub hold every lease.
func (h *hub) markDown() {
	h.lmu.Lock()
	h.down = true
	h.lmu.Unlock()
}

// wait waits for t, holding the leases when a keep-alive parks; false:
// the hub stopped.
func (h *hub) wait(t *time.Timer) bool {
	for {
		select {
		case <-h.ctx.Done():
			return false
		case <-h.holdc:
			h.hold()
		case <-t.C:
			return true
		}
	}
}

// probeLocked returns a parked lease to try a new stream with (0: none).
func (h *hub) probeLocked() clientv3.LeaseID {
	for g := range h.parked {
		if id := g.currentLease(); id != 0 {
			return id
		}
	}
	if h.held {
		for id := range h.leases {
			return id
		}
	}
	return 0
}

// hold parks every lease at once (no stream works): their keep-alives
// wait for an answer on a new stream, or for their TTL's end, without
// each waking at its due time to park. It moves each one's timer
// (kaHold) under lmu, so that no answer ends the hold midway, and runs
// no step: a lease costs one timer move. A lease bound later parks when
// due, as before.
func (h *hub) hold() {
	h.lmu.Lock()
	defer h.lmu.Unlock()
	if !h.held {
		return // a stream answered meanwhile
	}
	now := int64(time.Since(kaClock))
	for _, g := range h.leases {
		g.h.kaHold(now)
	}
}

// holding reports whether hold's parking is on (no answer since).
func (h *hub) holding() bool {
	h.lmu.Lock()
	defer h.lmu.Unlock()
	return h.held
}

// recv hands the stream's answers to their Registrations until it
// breaks; it reports whether any came.
func (h *hub) recv(s pb.Lease_LeaseKeepAliveClient) (answered bool) {
	for {
		resp, err := s.Recv()
		if err != nil {
			return answered
		}
		answered = true
		id := clientv3.LeaseID(resp.ID)
		h.lmu.Lock()
		g := h.leases[id]
		var woken []*registration
		for p := range h.parked {
			woken = append(woken, p)
		}
		h.down = false
		if h.held {
			h.held = false
			for _, p := range h.leases {
				if _, dup := h.parked[p]; !dup {
					woken = append(woken, p)
				}
			}
		}
		clear(h.parked)
		h.lmu.Unlock()
		for _, p := range woken {
			p.kaResume()
		}
		if g != nil {
			g.kaAnswer(id, resp.TTL)
		}
	}
}
