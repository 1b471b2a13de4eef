package nacostest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
)

// Defaults of a Cluster.
const (
	// DefaultSyncDelay is how long a node waits before it copies a
	// change of its clients' instances to the other nodes: Nacos 2.x's
	// nacos.core.protocol.distro.data.sync.delayMs (1 s).
	DefaultSyncDelay = time.Second
	// DefaultSyncedExpiry is how long a node keeps the copies of a
	// crashed node's clients: Nacos 2.x's nacos.naming.client.expired.time
	// (3 min), after which a copy its owner no longer verifies expires.
	DefaultSyncedExpiry = 3 * time.Minute
)

// Cluster is n Servers sharing their clients' ephemeral instances the way
// Nacos 2.x's Distro protocol does: each node owns the instances of the
// clients connected to it (it is their responsible node) and copies every
// change of them to the other running nodes after the sync delay
// (WithSyncDelay). Every node serves the union of its own clients' and its
// copies of the others', so a subscriber on any node sees every provider
// once the copies arrived.
//
// A node that stops ([Server.Stop] on [Cluster.Node]) is a crash: it
// loses its state and tells no one. Its clients fail over to another node
// (give them every node's address: [Cluster.ServerConfigs]), which may not
// hold their data yet (a change made within the sync delay before the
// crash never left the node) and which keeps its copies of the crashed
// node's clients until they expire (WithSyncedExpiry), as a Nacos node
// keeps a synced client its owner no longer verifies. A client that closes
// its connection to a running node is removed everywhere (after the sync
// delay). A node that starts again loads the data of the running nodes
// before it serves, as a Nacos node loads a snapshot from its peers.
//
// Create it with NewCluster; the zero value is not usable. Faults and
// counters are per node ([Cluster.Node]). Close stops every node and
// every pending copy. All methods are safe for concurrent use.
type Cluster struct {
	nodes  []*Server
	delay  time.Duration
	expiry time.Duration

	mu      sync.Mutex
	closed  bool
	pending map[syncKey]bool         // copies scheduled, not yet made
	timers  map[*time.Timer]struct{} // every timer not yet fired
	wg      sync.WaitGroup           // timer functions running

	// seq orders publications across the nodes, so that a node's own
	// newer publication of an address wins over an older copy from a
	// peer.
	seq atomic.Uint64
}

// syncKey names one client connection of one node.
type syncKey struct {
	origin int
	conn   string
}

// syncedCopy is a node's copy of another node's client.
type syncedCopy struct {
	published map[svcKey][]published
	at        time.Time // when it was copied
}

// A ClusterOption configures NewCluster.
type ClusterOption interface {
	applyCluster(*clusterOptions) error
}

type clusterOptionFunc func(*clusterOptions) error

func (f clusterOptionFunc) applyCluster(o *clusterOptions) error { return f(o) }

type clusterOptions struct {
	delay  time.Duration
	expiry time.Duration
	node   []Option
}

// WithSyncDelay sets how long a node waits before copying a change of its
// clients' instances to the other nodes (default DefaultSyncDelay). It
// must not be negative; 0 copies at once (still asynchronously).
func WithSyncDelay(d time.Duration) ClusterOption {
	return clusterOptionFunc(func(o *clusterOptions) error {
		if d < 0 {
			return fmt.Errorf("nacostest: WithSyncDelay(%v): must not be negative", d)
		}
		o.delay = d
		return nil
	})
}

// WithSyncedExpiry sets how long a node keeps its copies of a crashed
// node's clients (default DefaultSyncedExpiry). It must be positive.
func WithSyncedExpiry(d time.Duration) ClusterOption {
	return clusterOptionFunc(func(o *clusterOptions) error {
		if d <= 0 {
			return fmt.Errorf("nacostest: WithSyncedExpiry(%v): must be positive", d)
		}
		o.expiry = d
		return nil
	})
}

// WithNodeOptions sets the Options of every node (WithAddr is refused:
// each node takes a free loopback port).
func WithNodeOptions(opts ...Option) ClusterOption {
	return clusterOptionFunc(func(o *clusterOptions) error {
		o.node = append(o.node, opts...)
		return nil
	})
}

// NewCluster starts n nodes (n from 1 to 9; 3 is the usual Nacos cluster)
// on free loopback ports and returns them running. It returns an error
// naming a bad argument or option.
func NewCluster(n int, opts ...ClusterOption) (*Cluster, error) {
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("nacostest: NewCluster: n is %d, want 1 to 9 nodes", n)
	}
	o := clusterOptions{delay: DefaultSyncDelay, expiry: DefaultSyncedExpiry}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.applyCluster(&o); err != nil {
			return nil, err
		}
	}
	for _, opt := range o.node {
		var probe options = defaultOptions()
		if opt != nil {
			if err := opt.apply(&probe); err != nil {
				return nil, err
			}
			if probe.addr != defaultOptions().addr {
				return nil, errors.New("nacostest: NewCluster: WithNodeOptions: WithAddr is not allowed (each node takes a free loopback port)")
			}
		}
	}
	c := &Cluster{delay: o.delay, expiry: o.expiry, pending: map[syncKey]bool{}, timers: map[*time.Timer]struct{}{}}
	for i := range n {
		s, err := NewServer(o.node...)
		if err != nil {
			c.Close()
			return nil, err
		}
		s.mu.Lock()
		s.cluster, s.node, s.synced = c, i, map[syncKey]syncedCopy{}
		s.mu.Unlock()
		c.nodes = append(c.nodes, s)
	}
	return c, nil
}

// Node returns node i (0 ≤ i < n), to stop, start, fault or count it.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// ServerConfigs returns the nacos-sdk-go server configurations of every
// node, for a client that fails over between them.
func (c *Cluster) ServerConfigs() []constant.ServerConfig {
	out := make([]constant.ServerConfig, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.ServerConfig()
	}
	return out
}

// Instances returns node i's view of service (see [Server.Instances]).
func (c *Cluster) Instances(i int, namespace, group, service string) []Instance {
	return c.nodes[i].Instances(namespace, group, service)
}

// Close stops every node for good and cancels the copies not yet made.
// When it returns, no goroutine of the cluster is left. It is idempotent.
func (c *Cluster) Close() {
	c.mu.Lock()
	c.closed = true
	for t := range c.timers {
		if t.Stop() {
			c.wg.Done()
		}
	}
	clear(c.timers)
	c.mu.Unlock()
	c.wg.Wait()
	for _, s := range c.nodes {
		s.Close()
	}
}

// after runs fn in d on a goroutine Close waits for; nothing after Close.
func (c *Cluster) after(d time.Duration, fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer c.wg.Done()
		c.mu.Lock()
		delete(c.timers, t)
		closed := c.closed
		c.mu.Unlock()
		if !closed {
			fn()
		}
	})
	c.timers[t] = struct{}{}
}

// scheduleSync copies node origin's client conn to the other nodes after
// the sync delay; changes within the delay coalesce into one copy of the
// latest state.
func (c *Cluster) scheduleSync(origin int, conn string, run *runState) {
	k := syncKey{origin: origin, conn: conn}
	c.mu.Lock()
	if c.pending[k] || c.closed {
		c.mu.Unlock()
		return
	}
	c.pending[k] = true
	c.mu.Unlock()
	c.after(c.delay, func() {
		c.mu.Lock()
		delete(c.pending, k)
		c.mu.Unlock()
		c.sync(k, run)
	})
}

// sync copies k's current instances (none if the connection closed) to
// every other running node. Nothing is sent when the origin is stopped: a
// crashed node sends nothing.
func (c *Cluster) sync(k syncKey, run *runState) {
	snap, ok := c.nodes[k.origin].snapshotConn(k.conn, run)
	if !ok {
		return
	}
	for i, s := range c.nodes {
		if i != k.origin {
			s.applySynced(k, snap)
		}
	}
}

// nodeStopped expires, after the expiry, the other nodes' copies of node
// i's clients made before now.
func (c *Cluster) nodeStopped(i int, now time.Time) {
	c.after(c.expiry, func() {
		for j, s := range c.nodes {
			if j != i {
				s.expireSynced(i, now)
			}
		}
	})
}

// load returns, for node i starting, the data of the running nodes: their
// own clients' instances, and their copies of clients whose node is not
// running (a node hands over the clients it is responsible for itself).
func (c *Cluster) load(i int) map[syncKey]syncedCopy {
	out := map[syncKey]syncedCopy{}
	var copies []map[syncKey]syncedCopy
	for j, s := range c.nodes {
		if j == i {
			continue
		}
		native, synced := s.dataForPeer()
		for k, cp := range native {
			out[k] = cp
		}
		copies = append(copies, synced)
	}
	for _, synced := range copies {
		for k, cp := range synced {
			if k.origin == i || c.nodes[k.origin].Running() {
				continue // gone with i's crash, or handed over by its node
			}
			if _, ok := out[k]; !ok {
				out[k] = cp
			}
		}
	}
	return out
}

// snapshotConn returns a copy of the instances of connection addr, empty
// if it is closed; false if the node is stopped or is no longer in the
// run the copy was scheduled in (it crashed since: a restarted node does
// not know its old connections and sends nothing about them).
func (s *Server) snapshotConn(addr string, run *runState) (map[svcKey][]published, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil || s.run != run {
		return nil, false
	}
	out := map[svcKey][]published{}
	if c := s.conns[addr]; c != nil {
		for k, ps := range c.published {
			out[k] = clonePublished(ps)
		}
	}
	return out, true
}

func clonePublished(ps []published) []published {
	out := make([]published, len(ps))
	for i, p := range ps {
		out[i] = published{inst: cloneInstance(p.inst), seq: p.seq}
	}
	return out
}

// applySynced stores (or, when empty, drops) the copy of client k on a
// running node, pushing the changes to its subscribers.
func (s *Server) applySynced(k syncKey, snap map[svcKey][]published) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return
	}
	svcs := map[svcKey]bool{}
	for svc := range s.synced[k].published {
		svcs[svc] = true
	}
	for svc := range snap {
		svcs[svc] = true
	}
	befores := map[svcKey][]Instance{}
	for svc := range svcs {
		befores[svc] = s.hostsLocked(svc)
	}
	if len(snap) == 0 {
		delete(s.synced, k)
	} else {
		s.synced[k] = syncedCopy{published: snap, at: time.Now()}
	}
	for svc := range svcs {
		if !equalHosts(befores[svc], s.hostsLocked(svc)) {
			s.notifyLocked(svc)
		}
	}
}

// expireSynced drops the copies of node origin's clients made before t.
func (s *Server) expireSynced(origin int, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, cp := range s.synced {
		if k.origin != origin || cp.at.After(t) {
			continue
		}
		svcs := make([]svcKey, 0, len(cp.published))
		befores := make([][]Instance, 0, len(cp.published))
		for svc := range cp.published {
			svcs = append(svcs, svc)
			befores = append(befores, s.hostsLocked(svc))
		}
		delete(s.synced, k)
		for i, svc := range svcs {
			if !equalHosts(befores[i], s.hostsLocked(svc)) {
				s.notifyLocked(svc)
			}
		}
	}
}

// dataForPeer returns what a running node hands a starting peer: copies
// of its own clients' instances, and of its copies of other nodes'
// clients. It takes no other node's lock.
func (s *Server) dataForPeer() (native, synced map[syncKey]syncedCopy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	native, synced = map[syncKey]syncedCopy{}, map[syncKey]syncedCopy{}
	if s.run == nil {
		return native, synced
	}
	now := time.Now()
	for addr, c := range s.conns {
		if len(c.published) == 0 {
			continue
		}
		m := map[svcKey][]published{}
		for k, ps := range c.published {
			m[k] = clonePublished(ps)
		}
		native[syncKey{origin: s.node, conn: addr}] = syncedCopy{published: m, at: now}
	}
	for k, cp := range s.synced {
		m := map[svcKey][]published{}
		for svc, ps := range cp.published {
			m[svc] = clonePublished(ps)
		}
		synced[k] = syncedCopy{published: m, at: cp.at}
	}
	return native, synced
}

// syncConnLocked schedules the copy of connection c to the other nodes,
// in a cluster and while the node runs (a crashing node sends nothing).
// s.mu must be held.
func (s *Server) syncConnLocked(c *conn) {
	if s.cluster == nil || s.run == nil {
		return
	}
	// scheduleSync takes the cluster's lock only: no lock-order cycle
	// with node locks (the timer function takes node locks without it).
	s.cluster.scheduleSync(s.node, c.addr, s.run)
}

// syncedHostsLocked adds the node's copies of other nodes' clients to add.
// s.mu must be held.
func (s *Server) syncedHostsLocked(k svcKey, add func(published)) {
	for _, cp := range s.synced {
		for _, p := range cp.published[k] {
			add(p)
		}
	}
}

// loadFromPeers replaces the node's copies with the running peers' data,
// when it starts (before it serves). s.mu must not be held.
func (s *Server) loadFromPeers() {
	if s.cluster == nil {
		return
	}
	data := s.cluster.load(s.node)
	s.mu.Lock()
	s.synced = data
	s.mu.Unlock()
}
