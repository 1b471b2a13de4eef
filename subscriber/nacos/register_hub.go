package nacos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound"
)

// hubs holds the per-client state shared by the client's Registrations.
var hubs = struct {
	mu       sync.Mutex
	m        map[naming_client.INamingClient]*hub
	settling chan struct{} // closed when a Register returns; made by a reclaim that waits for one
}{m: map[naming_client.INamingClient]*hub{}}

// hub is what a client's Registrations share: the slots (one registration
// per service), the connection monitor, the query connection.
type hub struct {
	client naming_client.INamingClient

	// Under hubs.mu.
	slots    map[string]*registration // held from Register to Shutdown/Close
	attached int                      // the slots' Registrations with attached set
	// told: the attached Registrations with observers or meters, told of
	// a disconnection at once (the others learn of it lazily: down).
	told  map[*registration]struct{}
	stopM context.CancelFunc
	doneM chan struct{}

	conn connState

	qmu    sync.Mutex
	query  *naming_grpc.NamingGrpcProxy
	qclose context.CancelFunc
	qdone  bool // released: no query connection is opened again
}

// connState is what a hub's monitor saw of its client's connection:
// down, since downAt (Unix nanoseconds, wall clock), until it has told
// every Registration of its return. A Registration that was not told of
// the disconnection (not in told) is repairing while down is set and it
// is registered (Status). A Registration keeps its hub's from Register
// on (the hub a Shutdown reclaims after Close may be another).
type connState struct {
	down   atomic.Bool
	downAt atomic.Int64
}

// owners records, per client and service, the Registration whose
// instance the client's connection holds when it is not the one holding
// the service's slot (by far the common case, which costs no record):
// the last one to send a register request for the service on that
// client. Nacos keeps one instance per service per connection and
// deregisters it whatever address a request names, so only the owner may
// deregister. Close keeps the record (the instance stays); a
// deregistration clears it (a nil record while the slot is held). By
// client, then by slot (one map per client: its keys are the slots'
// strings). Under hubs.mu; read and written through ownerLocked,
// setOwnerLocked and setHolderLocked.
var owners = map[naming_client.INamingClient]map[string]*registration{}

// holderLocked returns the Registration holding slot on client's hub
// (nil if none).
func holderLocked(client naming_client.INamingClient, slot string) *registration {
	if h := hubs.m[client]; h != nil {
		return h.slots[slot]
	}
	return nil
}

// ownerLocked returns the owner of slot on client (nil if none).
func ownerLocked(client naming_client.INamingClient, slot string) *registration {
	if g, ok := owners[client][slot]; ok {
		return g
	}
	return holderLocked(client, slot)
}

// setOwnerLocked records g as the owner of slot on client; a nil g
// clears the record.
func setOwnerLocked(client naming_client.INamingClient, slot string, g *registration) {
	m := owners[client]
	if g == holderLocked(client, slot) {
		if m != nil {
			delete(m, slot)
			if len(m) == 0 {
				delete(owners, client)
			}
		}
		return
	}
	if m == nil {
		m = map[string]*registration{}
		owners[client] = m
	}
	m[slot] = g
}

// setHolderLocked makes g hold slot on h, its client's hub (a nil g
// gives the slot back), keeping the slot's owner.
func setHolderLocked(h *hub, slot string, g *registration) {
	owner := ownerLocked(h.client, slot)
	if g == nil {
		delete(h.slots, slot)
	} else {
		h.slots[slot] = g
	}
	setOwnerLocked(h.client, slot, owner)
}

// acquireHub takes the service's slot on client's hub for g and makes g
// the service's owner on client; prev is the owner before (nil if none).
func acquireHub(client naming_client.INamingClient, g *registration) (h *hub, prev *registration, err error) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h = hubs.m[client]
	if h == nil {
		h = &hub{client: client, slots: map[string]*registration{}}
		hubs.m[client] = h
	}
	if _, taken := h.slots[g.slot]; taken {
		if len(h.slots) == 0 {
			delete(hubs.m, client)
		}
		return nil, nil, &rebound.ArgumentError{Func: "nacos.Register", Arg: "key",
			Reason: fmt.Sprintf("must not name a service the client already registers (%s): Nacos keeps one instance per service per connection", g.slot),
			Err:    errConflict}
	}
	prev = ownerLocked(client, g.slot)
	h.slots[g.slot] = g
	setOwnerLocked(client, g.slot, g)
	return h, prev, nil
}

// setOwner makes g the owner of its service on client again (a failed
// first registration gives the service back to the one before); a nil
// g clears the record.
func setOwner(client naming_client.INamingClient, slot string, g *registration) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	setOwnerLocked(client, slot, g)
}

// disown clears g's ownership of its service on client (its instance was
// deregistered), unless another Registration owns it now.
func disown(client naming_client.INamingClient, g *registration) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	if ownerLocked(client, g.slot) == g {
		setOwnerLocked(client, g.slot, nil)
	}
}

// reclaimHub takes the service's slot on client's hub for g again (after
// Close gave it back) if g still owns the service on client. Otherwise g
// has nothing left to deregister, unless the Registration holding the
// slot (holder) has its first registration still in flight and it fails
// (it then gives the service back to g): settling is closed when a
// Register returns, to look again.
func reclaimHub(client naming_client.INamingClient, g *registration) (h *hub, holder *registration, settling <-chan struct{}) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h = hubs.m[client]
	if h == nil {
		h = &hub{client: client, slots: map[string]*registration{}}
		hubs.m[client] = h
	}
	if other, taken := h.slots[g.slot]; taken && other != g {
		if other.settled {
			return nil, nil, nil
		}
		if hubs.settling == nil {
			hubs.settling = make(chan struct{})
		}
		return nil, other, hubs.settling
	}
	if ownerLocked(client, g.slot) != g {
		if len(h.slots) == 0 {
			delete(hubs.m, client)
		}
		return nil, nil, nil
	}
	setHolderLocked(h, g.slot, g)
	return h, nil, nil
}

// settle records that g's Register returned and wakes the reclaims
// waiting for a Register to return.
func settle(g *registration) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	g.settled = true
	if hubs.settling != nil {
		close(hubs.settling)
		hubs.settling = nil
	}
}

// attach starts delivering connection events to g (and the monitor with
// the first Registration).
func (h *hub) attach(g *registration) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	if !g.attached {
		g.attached = true
		h.attached++
		if g.eager() {
			if h.told == nil {
				h.told = map[*registration]struct{}{}
			}
			h.told[g] = struct{}{}
		}
	}
	if h.stopM == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.stopM, h.doneM = cancel, make(chan struct{})
		go h.monitor(ctx, h.doneM)
	}
}

// detach stops delivering connection events to g.
func (h *hub) detach(g *registration) {
	var stop context.CancelFunc
	var done chan struct{}
	hubs.mu.Lock()
	if g.attached {
		g.attached = false
		h.attached--
		delete(h.told, g)
	}
	if h.attached == 0 && h.stopM != nil {
		stop, done = h.stopM, h.doneM
		h.stopM, h.doneM = nil, nil
	}
	hubs.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// release gives g's slot back; the last one closes the query connection.
func (h *hub) release(g *registration) {
	hubs.mu.Lock()
	if h.slots[g.slot] == g {
		setHolderLocked(h, g.slot, nil)
	}
	last := len(h.slots) == 0
	if last && hubs.m[h.client] == h {
		delete(hubs.m, h.client)
	}
	hubs.mu.Unlock()
	if last {
		h.qmu.Lock()
		h.qdone = true
		if h.query != nil {
			h.query.CloseClient()
			h.qclose()
			h.query = nil
		}
		h.qmu.Unlock()
	}
}

// downPollCap is the longest wait between two ServerHealthy calls of a
// hub's monitor while the client is disconnected.
const downPollCap = 4 * time.Second

// monitor polls the client's ServerHealthy and tells the Registrations of
// every transition. While connected it polls every 100 ms (an atomic load
// in the SDK). While not, each call makes the SDK send HTTP requests that
// fail and log: it polls 1 s after the disconnection, then at intervals
// doubling up to downPollCap, so that a long outage costs one call every
// 4 s and a reconnect is seen up to 4 s after it (docs/providers.md); and
// it calls only once a server accepts a TCP connection (reachable).
func (h *hub) monitor(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	up := h.client.ServerHealthy()
	switch down := h.conn.down.Load(); {
	case up && down:
		h.broadcast(true) // came back while no monitor ran
	case !up && !down:
		h.broadcast(false) // gone since the request of the Register that started it
	}
	down := defaultDownPollInterval // the next wait while disconnected
	t := time.NewTimer(defaultPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := (up || h.reachable(ctx)) && h.client.ServerHealthy()
		if now != up {
			up = now
			down = defaultDownPollInterval
			h.broadcast(up)
		}
		if up {
			t.Reset(defaultPollInterval)
		} else {
			t.Reset(down)
			down = min(2*down, downPollCap)
		}
	}
}

// reachable reports whether one of the client's servers accepts a TCP
// connection on its gRPC port, or true when it cannot tell: a client
// without static server addresses, or a server that the SDK's gRPC
// connection reaches through a proxy (grpc-go's HTTPS_PROXY and
// NO_PROXY, as net/http reads them). While disconnected the monitor asks
// it before ServerHealthy: a refused dial costs microseconds, where
// ServerHealthy has the SDK send HTTP requests that fail and log.
func (h *hub) reachable(ctx context.Context) bool {
	sc, ok := h.client.(interface {
		GetServerConfig() ([]constant.ServerConfig, error)
	})
	if !ok {
		return true
	}
	servers, err := sc.GetServerConfig()
	if err != nil || len(servers) == 0 {
		return true
	}
	for _, s := range servers {
		port := s.GrpcPort
		if port == 0 {
			port = s.Port + constant.RpcPortOffset
		}
		addr := net.JoinHostPort(s.IpAddr, strconv.FormatUint(port, 10))
		if p, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "https", Host: addr}}); p != nil || err != nil {
			return true
		}
		dctx, cancel := context.WithTimeout(ctx, probeTimeout)
		c, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			_ = c.Close()
			return true
		}
	}
	return false
}

// probeTimeout bounds reachable's dial of one server.
const probeTimeout = 200 * time.Millisecond

// broadcast tells the Registrations of a transition. A disconnection
// is told at once only to those with observers or meters (told), whose
// events and instruments show it; the others are not touched, so that an
// outage costs O(1) however many there are: their Status derives the
// state from down, the periodic check's timer falling due is dropped
// (fire), and a failed attempt waits for the connection (work.Up). The
// return is told to every one: each checks after the grace, as after a
// disconnection it was told of, repairing since downAt.
func (h *hub) broadcast(up bool) {
	if !up {
		h.conn.downAt.Store(time.Now().UnixNano())
		h.conn.down.Store(true)
	}
	hubs.mu.Lock()
	var regs []*registration
	if up {
		regs = make([]*registration, 0, h.attached)
		for _, g := range h.slots {
			if g.attached {
				regs = append(regs, g)
			}
		}
	} else {
		regs = make([]*registration, 0, len(h.told))
		for g := range h.told {
			regs = append(regs, g)
		}
	}
	hubs.mu.Unlock()
	if up && h.conn.down.Load() {
		at := time.Unix(0, h.conn.downAt.Load())
		for _, g := range regs {
			if !g.eager() {
				g.track.Lapse(at)
			}
		}
		h.conn.down.Store(false)
	}
	for _, g := range regs {
		g.connection(up)
	}
}

// listed queries the server's list of the service (all clusters, healthy
// or not) on the hub's own connection and reports whether it holds in's
// address (found), and with in's values (same).
func (h *hub) listed(service, group string, in model.Instance) (found, same bool, err error) {
	p, err := h.queryProxy()
	if err != nil {
		return false, false, err
	}
	svc, err := p.QueryInstancesOfService(service, group, "", 0, false)
	if err != nil {
		return false, false, err
	}
	if svc == nil || svc.LastRefTime == 0 {
		return false, false, ErrRejected
	}
	cluster := in.ClusterName
	if cluster == "" {
		cluster = defaultCluster
	}
	for _, x := range svc.Hosts {
		c := x.ClusterName
		if c == "" {
			c = defaultCluster
		}
		if x.Ip == in.Ip && x.Port == in.Port && c == cluster {
			// Listed as registered only with the values this
			// Registration sent: a stale copy (the SDK's redo re-sending
			// the instance as it was before an Update) is not.
			if sameRegistered(x, in) {
				return true, true, nil
			}
			found = true
		}
	}
	return found, false, nil
}

func (h *hub) queryProxy() (*naming_grpc.NamingGrpcProxy, error) {
	h.qmu.Lock()
	defer h.qmu.Unlock()
	if h.query != nil {
		return h.query, nil
	}
	if h.qdone {
		// A check that raced the last release: a connection opened now
		// would never be closed.
		return nil, errClosed
	}
	p, cancel, err := newQueryProxy(h.client, "", "register")
	if err != nil {
		return nil, err
	}
	h.query, h.qclose = p, cancel
	return p, nil
}

// defaultCluster is the cluster Nacos gives an instance registered
// without one.
const defaultCluster = "DEFAULT"
