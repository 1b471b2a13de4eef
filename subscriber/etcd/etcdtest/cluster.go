package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound/internal/closed"
)

var (
	// ErrClosed is returned by the methods of a closed [Cluster].
	// It matches rebound.ErrClosed.
	ErrClosed = closed.New("etcdtest: cluster closed")
	// ErrNoLeader is returned (wrapped) by [Cluster.WaitLeader] when ctx
	// ends before a leader is elected.
	ErrNoLeader = errors.New("etcdtest: no leader")
)

// Cluster is a real etcd cluster of one or more members running in this
// process, on loopback ports. Create it with [NewCluster]; the zero value is
// not usable. Its methods are safe for concurrent use; starting and stopping
// members is serialized.
//
// Each member keeps its data, peer port and client endpoint for the life of
// the Cluster: [Cluster.StopMember] and [Cluster.StartMember] crash and
// restart one member with its data, [Cluster.Stop] and [Cluster.Start] the
// whole cluster.
type Cluster struct {
	opts    options
	dir     string
	ownDir  bool
	members []*member
	stats   counters
	release func() // frees the member ports reserved by freePorts

	life   sync.Mutex // serializes StartMember, StopMember, Start, Stop, Close
	closed bool       // guarded by life
}

type member struct {
	idx      int
	name     string
	dir      string
	peer     url.URL // listen and advertise
	internal url.URL // the member's real client listener
	public   url.URL // the proxy clients dial, advertised
	proxy    *proxy

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped
}

// NewCluster starts a cluster of size members (1 for a single server, 3 for
// a cluster that survives the loss of one member) and returns once every
// member is ready and a leader is elected, or an error (after stopping what
// it started). size must be at least 1.
func NewCluster(size int, opts ...Option) (*Cluster, error) {
	if size < 1 {
		return nil, argErr("NewCluster", "size", fmt.Sprintf("must be >= 1; got %d", size))
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.apply(&o); err != nil {
			return nil, err
		}
	}
	c := &Cluster{opts: o, dir: o.dir}
	c.stats.byID = map[string]int64{}
	if c.dir == "" {
		dir, err := os.MkdirTemp("", "etcdtest-")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: NewCluster: %w", err)
		}
		c.dir, c.ownDir = dir, true
	}
	ports, release, err := freePorts(3 * size)
	if err != nil {
		_ = c.removeDir()
		return nil, err
	}
	c.release = release
	for i := range size {
		m := &member{
			idx:      i,
			name:     fmt.Sprintf("m%d", i),
			peer:     loopbackURL(ports[3*i]),
			internal: loopbackURL(ports[3*i+1]),
			public:   loopbackURL(ports[3*i+2]),
		}
		m.dir = filepath.Join(c.dir, m.name)
		m.proxy = newProxy(m.public.Host, m.internal.Host)
		c.members = append(c.members, m)
	}
	if err := c.Start(); err != nil {
		_ = c.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.startTimeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("etcdtest: NewCluster: %w", err)
	}
	return c, nil
}

func loopbackURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)}
}

// freePorts returns n distinct free loopback ports, reserved until
// release is called (Close calls it). The members' listeners and the
// proxies bind these ports again at every StartMember and Start, and
// nothing else may take one in between: with the ports merely free when
// freePorts returned, a busy machine's outgoing connections (which take
// their local port from the same ephemeral range) or another test
// binary's listeners took a stopped member's port, and its restart failed
// with "bind: address already in use". Where reservePort can hold a port
// without listening on it (Linux), the reservation keeps every other
// socket off it (connections to it are refused, as to a stopped process)
// while still letting this process listen on it; elsewhere the ports are
// only free when freePorts returns.
func freePorts(n int) (ports []int, release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for range n {
		port, r, err := reservePort()
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("etcdtest: reserve a port: %w", err)
		}
		releases = append(releases, r)
		ports = append(ports, port)
	}
	return ports, release, nil
}

func (c *Cluster) removeDir() error {
	if c.ownDir {
		if err := os.RemoveAll(c.dir); err != nil {
			return fmt.Errorf("etcdtest: remove %s: %w", c.dir, err)
		}
	}
	return nil
}

// Size returns the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Endpoints returns the client URLs of every member ("http://127.0.0.1:port"),
// for clientv3.Config.Endpoints. They stay the same across restarts.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.public.String()
	}
	return eps
}

// Endpoint returns the client URL of member i.
func (c *Cluster) Endpoint(i int) string { return c.members[i].public.String() }

// ClientConfig returns a client configuration for the whole cluster with a
// no-op logger (the client otherwise builds its own logger at Info).
func (c *Cluster) ClientConfig() clientv3.Config {
	return clientv3.Config{Endpoints: c.Endpoints(), Logger: zap.NewNop()}
}

// Stats returns the request counters (see [Stats]).
func (c *Cluster) Stats() Stats { return c.stats.snapshot() }

// ResetStats sets every request counter to zero.
func (c *Cluster) ResetStats() { c.stats.reset() }

func (c *Cluster) config(m *member) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{m.peer}
	cfg.AdvertisePeerUrls = []url.URL{m.peer}
	cfg.ListenClientUrls = []url.URL{m.internal}
	cfg.AdvertiseClientUrls = []url.URL{m.public}
	initial := make([]string, len(c.members))
	for i, o := range c.members {
		initial[i] = o.name + "=" + o.peer.String()
	}
	cfg.InitialCluster = strings.Join(initial, ",")
	cfg.InitialClusterToken = "etcdtest"
	cfg.ClusterState = embed.ClusterStateFlagNew // ignored once the member has data
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.opts.log.Named(m.name))
	cfg.TickMs = uint(c.opts.tick / time.Millisecond)
	cfg.ElectionMs = uint(c.opts.election / time.Millisecond)
	// Test data need not survive a power cut; fsync would make every
	// write wait for the disk.
	cfg.UnsafeNoFsync = true
	cfg.EnableGRPCGateway = false
	cfg.GRPCAdditionalServerOptions = c.serverOptions(m.idx)
	return cfg
}

// StartMember starts member i, which must be stopped, with its data. It
// returns once the member listens; it serves clients once it has joined a
// quorum (see [Cluster.WaitReady]). It returns ErrClosed after Close.
func (c *Cluster) StartMember(i int) error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return ErrClosed
	}
	return c.startLocked(c.members[i])
}

func (c *Cluster) startLocked(m *member) error {
	m.mu.Lock()
	running := m.etcd != nil
	m.mu.Unlock()
	if running {
		return fmt.Errorf("etcdtest: member %s is running", m.name)
	}
	e, err := embed.StartEtcd(c.config(m))
	if err != nil {
		return fmt.Errorf("etcdtest: start member %s: %w", m.name, err)
	}
	if err := m.proxy.start(); err != nil {
		e.Close()
		return err
	}
	m.mu.Lock()
	m.etcd = e
	m.mu.Unlock()
	return nil
}

// StopMember stops member i as a crash would: its client connections are
// dropped at once, then the server stops (its data stays for StartMember).
// Stopping a stopped member does nothing.
func (c *Cluster) StopMember(i int) {
	c.life.Lock()
	defer c.life.Unlock()
	c.stopLocked(c.members[i])
}

func (c *Cluster) stopLocked(m *member) {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e == nil {
		return
	}
	m.proxy.stop()
	// HardStop first: a crashed member does not hand its leadership over
	// (Close alone would try to, and wait up to etcd's request timeout
	// when the other members are stopping too).
	if e.Server != nil {
		e.Server.HardStop()
	}
	e.Close()
}

// Start starts every stopped member (all at once: a restarting cluster
// needs a quorum before any member is ready). It returns once they listen;
// use [Cluster.WaitReady] to wait until they serve.
func (c *Cluster) Start() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return ErrClosed
	}
	var errs []error
	for _, m := range c.members {
		m.mu.Lock()
		running := m.etcd != nil
		m.mu.Unlock()
		if !running {
			if err := c.startLocked(m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Stop stops every member (see [Cluster.StopMember]); the data stays.
func (c *Cluster) Stop() {
	c.life.Lock()
	defer c.life.Unlock()
	c.stopAllLocked()
}

func (c *Cluster) stopAllLocked() {
	// Drop every client connection first, so that clients see the whole
	// cluster go down at once rather than member after member.
	for _, m := range c.members {
		m.proxy.stop()
	}
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(func() { c.stopLocked(m) })
	}
	wg.Wait()
}

// Wipe stops every member and deletes their data, as if the cluster were
// lost and recreated empty (or restored from an empty backup). The next
// Start forms a new cluster on the same addresses, with the same member
// and cluster IDs: only the data, revisions and leases are new.
func (c *Cluster) Wipe() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.stopAllLocked()
	var errs []error
	for _, m := range c.members {
		if err := os.RemoveAll(m.dir); err != nil {
			errs = append(errs, fmt.Errorf("etcdtest: wipe member %s: %w", m.name, err))
		}
	}
	return errors.Join(errs...)
}

// Close stops every member and removes the data directory if NewCluster
// created it. When it returns, no goroutine of the Cluster is left (see
// the package documentation for the ones etcd itself leaves). Close
// implements io.Closer: it is idempotent and returns the error of
// removing the directory, if any (later calls return nil).
func (c *Cluster) Close() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.stopAllLocked()
	if c.release != nil {
		c.release()
	}
	return c.removeDir()
}

// BlackholeMember makes member i unreachable for clients without closing
// anything, as a partition or a frozen host would: the member keeps
// running (and talking to its peers), its client connections stay open
// and new ones are accepted, but no byte passes in either direction.
// Clients notice only through their own timeouts (gRPC keep-alive).
// HealMember ends it.
func (c *Cluster) BlackholeMember(i int) { c.members[i].proxy.blackhole.Store(true) }

// HealMember ends a BlackholeMember: it closes the member's client
// connections (their streams lost bytes and cannot resume) and lets new
// ones through. Healing a member that is not blackholed does nothing.
func (c *Cluster) HealMember(i int) {
	p := c.members[i].proxy
	if p.blackhole.Swap(false) {
		p.dropConnections()
	}
}

// Running reports whether member i is running.
func (c *Cluster) Running(i int) bool {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd != nil
}

// Etcd returns the embedded server of member i, or nil while it is
// stopped. Do not Close it: use StopMember.
func (c *Cluster) Etcd(i int) *embed.Etcd {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd
}

// Leader returns the index of the member that is the raft leader by its
// own account, or -1 if no running member is.
func (c *Cluster) Leader() int {
	for i := range c.members {
		e := c.Etcd(i)
		if e == nil {
			continue
		}
		if s := e.Server; s != nil && uint64(s.MemberID()) == s.Lead() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member is the leader and every running
// member agrees, and returns its index. It polls every few milliseconds
// until ctx is done; then it returns an error wrapping ErrNoLeader and
// ctx's error.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if l := c.Leader(); l >= 0 && c.agree(l) {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-tick.C:
		}
	}
}

// agree reports whether every running member follows leader l.
func (c *Cluster) agree(l int) bool {
	le := c.Etcd(l)
	if le == nil {
		return false
	}
	id := uint64(le.Server.MemberID())
	for i := range c.members {
		if e := c.Etcd(i); e != nil && e.Server.Lead() != id {
			return false
		}
	}
	return true
}

// WaitReady waits until every running member is ready to serve clients
// and a leader is elected, or ctx is done.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for i := range c.members {
		e := c.Etcd(i)
		if e == nil {
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-e.Server.StopNotify():
			return fmt.Errorf("etcdtest: member %s stopped before it was ready", c.members[i].name)
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: member %s not ready: %w", c.members[i].name, ctx.Err())
		}
	}
	_, err := c.WaitLeader(ctx)
	return err
}

var _ io.Closer = (*Cluster)(nil)
