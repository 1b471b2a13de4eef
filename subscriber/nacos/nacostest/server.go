package nacostest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	nacospb "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ErrClosed is returned by [Server.Start] after [Server.Close].
var ErrClosed = errors.New("nacostest: server closed")

// ErrRunning is returned by [Server.Start] when the server is already
// running.
var ErrRunning = errors.New("nacostest: server already running")

// Server is an in-process Nacos 2.x naming server speaking the gRPC protocol
// of nacos-sdk-go v2. Create it with [NewServer]; the zero value is not
// usable. All methods are safe for concurrent use.
//
// State (instances, connections, subscriptions) lives only while the server
// runs: [Server.Stop] discards it, as a crashed process would, and
// [Server.Start] comes back empty on the same address. Counters
// ([Server.Stats]) and fault settings survive restarts.
type Server struct {
	opts     options
	log      *zap.Logger
	listenOn string // host:port to (re)listen on; the port is fixed after NewServer
	dialHost string // IPv4 address clients dial

	life   sync.Mutex // serializes Start, Stop and Close
	closed bool       // guarded by life

	mu    sync.Mutex
	run   *runState                        // nil while stopped
	conns map[string]*conn                 // by peer address
	own   map[svcKey]map[instKey]published // instances registered through the API
	edits map[svcKey]map[instKey]edit      // an operator's edits (UpdateInstance)
	seq   uint64                           // publication order

	faults  faults
	stats   counters
	release func() // frees the port reserved by reserveAddr; called by Close

	// In a Cluster (nil otherwise): the cluster, this node's index and
	// its copies of the other nodes' clients, guarded by mu.
	cluster *Cluster
	node    int
	synced  map[syncKey]syncedCopy
}

// runState is one run of the server, from Start to Stop.
type runState struct {
	grpc *grpc.Server
	stop chan struct{}  // closed by Stop
	wg   sync.WaitGroup // every handler and goroutine of this run
}

// NewServer starts a server on the address set by [WithAddr] (default
// "127.0.0.1:0", a free loopback port) and returns it running. It returns an
// error naming the bad option or address, or the listen error. Call
// [Server.Close] when done (for example with t.Cleanup(srv.Close)).
func NewServer(opts ...Option) (*Server, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue // a nil Option is ignored, as everywhere in rebound
		}
		if err := opt.apply(&o); err != nil {
			return nil, err
		}
	}
	listenOn, dialHost, err := parseAddr(o.addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:     o,
		log:      o.logger,
		listenOn: listenOn,
		dialHost: dialHost,
		conns:    map[string]*conn{},
		own:      map[svcKey]map[instKey]published{},
		edits:    map[svcKey]map[instKey]edit{},
	}
	s.faults.errs = map[string]int{}
	s.faults.rejects = map[string]Rejection{}
	s.stats.byType = map[string]int64{}
	// Hold the port for the life of the Server (where the system allows
	// it), so that Start finds it free after a Stop.
	reserved, release, err := reserveAddr(listenOn)
	if err != nil {
		return nil, fmt.Errorf("nacostest: listen on %q: %w", o.addr, err)
	}
	lis, err := net.Listen("tcp4", reserved)
	if err != nil {
		release()
		return nil, fmt.Errorf("nacostest: listen on %q: %w", o.addr, err)
	}
	s.release = release
	// Fix the port so that Start binds the same address again.
	s.listenOn = lis.Addr().String()
	s.serve(lis)
	return s, nil
}

// parseAddr validates a WithAddr address and returns the address to listen
// on and the host clients dial.
func parseAddr(addr string) (listenOn, dialHost string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("nacostest: WithAddr(%q): %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", "", fmt.Errorf("nacostest: WithAddr(%q): port %q is not a number in 0..65535", addr, port)
	}
	port = strconv.FormatUint(p, 10)
	switch host {
	case "":
		return net.JoinHostPort("0.0.0.0", port), "127.0.0.1", nil
	case "localhost":
		return net.JoinHostPort("127.0.0.1", port), "127.0.0.1", nil
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil {
		return "", "", fmt.Errorf("nacostest: WithAddr(%q): host %q is not an IPv4 address (nacos-sdk-go cannot dial IPv6 literals)", addr, host)
	}
	if ip.IsUnspecified() {
		return net.JoinHostPort(ip.String(), port), "127.0.0.1", nil
	}
	return net.JoinHostPort(ip.String(), port), ip.String(), nil
}

// serve starts a run on lis. s.life must be held, or s must be new.
func (s *Server) serve(lis net.Listener) {
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(10<<20),
		// nacos-sdk-go pings every 60 s without streams; the gRPC default
		// policy (5 min) would answer with GOAWAY "too_many_pings".
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             5 * time.Second,
			PermitWithoutStream: true,
		}),
	)
	nacospb.RegisterRequestServer(gs, requestService{s})
	nacospb.RegisterBiRequestStreamServer(gs, streamService{s})
	r := &runState{grpc: gs, stop: make(chan struct{})}
	r.wg.Add(1)
	s.mu.Lock()
	s.run = r
	s.mu.Unlock()
	go func() {
		defer r.wg.Done()
		// Serve returns when Stop closes the listener.
		_ = gs.Serve(lis)
	}()
	s.log.Debug("nacostest: serving", zap.String("addr", s.listenOn))
}

// Addr returns the address the server listens on, "ip:port". It does not
// change across [Server.Stop] and [Server.Start].
func (s *Server) Addr() string { return s.listenOn }

// GRPCPort returns the port the server listens on: the value for
// constant.ServerConfig.GrpcPort.
func (s *Server) GRPCPort() uint64 {
	_, port, _ := net.SplitHostPort(s.listenOn)
	p, _ := strconv.ParseUint(port, 10, 16)
	return p
}

// HTTPPort returns GRPCPort()-1000: the value for constant.ServerConfig.Port
// when GrpcPort is left zero, since nacos-sdk-go then dials gRPC at
// Port+1000. It returns 0 when GRPCPort() is 1000 or less; use
// [Server.ServerConfig] then. The server serves no HTTP.
func (s *Server) HTTPPort() uint64 {
	if p := s.GRPCPort(); p > constant.RpcPortOffset {
		return p - constant.RpcPortOffset
	}
	return 0
}

// ServerConfig returns a ready constant.ServerConfig for this server:
// IpAddr is the dial address, GrpcPort is [Server.GRPCPort] and Port is
// [Server.HTTPPort] (GRPCPort itself when HTTPPort is 0). The server serves
// no HTTP, but Port still matters to nacos-sdk-go: while its gRPC
// connection is down, NamingClient.ServerHealthy falls back to three HTTP
// requests to IpAddr:Port, each bounded by ClientConfig.TimeoutMs. Nothing
// normally listens on GRPCPort-1000, so they fail at once with "connection
// refused" and ServerHealthy reports false.
func (s *Server) ServerConfig() constant.ServerConfig {
	port := s.HTTPPort()
	if port == 0 {
		port = s.GRPCPort()
	}
	return constant.ServerConfig{
		IpAddr:   s.dialHost,
		Port:     port,
		GrpcPort: s.GRPCPort(),
	}
}

// Start restarts a stopped server on the same address with fresh state, as
// a restarted Nacos process would: no connections, no subscriptions and only
// the instances registered through [Server.RegisterInstance] since Stop.
// Clients reconnect by themselves (nacos-sdk-go retries with a delay growing
// by 100 ms per failed attempt, up to 5 s) and re-register and resubscribe.
//
// It returns [ErrRunning] if the server is running, [ErrClosed] after
// [Server.Close], or the listen error (for example if another process took
// the port meanwhile).
func (s *Server) Start() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.mu.Lock()
	running := s.run != nil
	s.mu.Unlock()
	if running {
		return ErrRunning
	}
	lis, err := net.Listen("tcp4", s.listenOn)
	if err != nil {
		return fmt.Errorf("nacostest: restart on %s: %w", s.listenOn, err)
	}
	// A cluster node loads its peers' data before it serves.
	s.loadFromPeers()
	s.serve(lis)
	return nil
}

// Stop stops the server at once, like a crash: it closes the listener and
// every connection (grpc.Server.Stop), so clients see their streams fail
// and start reconnecting, waits for every goroutine of the server to end and
// discards all state. Stop on a stopped or closed server does nothing.
func (s *Server) Stop() {
	s.life.Lock()
	defer s.life.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	s.mu.Lock()
	r := s.run
	s.run = nil
	s.mu.Unlock()
	if r == nil {
		return
	}
	close(r.stop)
	r.grpc.Stop()
	r.wg.Wait()
	s.mu.Lock()
	clear(s.conns) // already empty: every stream handler removed its connection
	clear(s.own)
	clear(s.edits)
	clear(s.synced)
	cluster := s.cluster
	s.mu.Unlock()
	if cluster != nil {
		cluster.nodeStopped(s.node, time.Now())
	}
	s.log.Debug("nacostest: stopped", zap.String("addr", s.listenOn))
}

// Close stops the server for good: after Close, [Server.Start] returns
// [ErrClosed]. When Close returns, no goroutine of the server is left.
// Close is idempotent.
func (s *Server) Close() {
	s.life.Lock()
	defer s.life.Unlock()
	s.stopLocked()
	if !s.closed {
		s.release()
	}
	s.closed = true
}

// Running reports whether the server is running (started and not stopped).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run != nil
}

// enter registers a handler with the current run. It reports false when the
// server is stopped. The caller must call r.wg.Done when it returns.
func (s *Server) enter() (*runState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.run
	if r == nil {
		return nil, false
	}
	r.wg.Add(1)
	return r, true
}
