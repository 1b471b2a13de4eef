package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound/subscriber/nacos/nacoslog"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// registry is where the run's naming clients come from: the in-process
// nacostest server (the default) or a Nacos server given with -nacos.
type registry struct {
	embedded *nacostest.Server // nil with an external server
	server   constant.ServerConfig
	dir      string // the SDK's cache and log files, removed by close
	log      *zap.Logger
	sdkLevel zapcore.Level // zapcore.InvalidLevel: discard the SDK's log

	// mu serializes client creation: clients.NewNamingClient replaces the
	// SDK's process-wide logger, which nacoslog.Install then
	// points back at ours.
	mu      sync.Mutex
	clients int
}

// openRegistry starts the embedded server, or checks the address of an
// external one (host:port of its HTTP API; the SDK dials gRPC at port+1000).
func openRegistry(external string, log *zap.Logger, sdkLevel zapcore.Level) (*registry, error) {
	dir, err := os.MkdirTemp("", "rebound-rpc-")
	if err != nil {
		return nil, err
	}
	r := &registry{dir: dir, log: log, sdkLevel: sdkLevel}
	if external == "" {
		srv, err := nacostest.NewServer(nacostest.WithLogger(log.Named("nacostest")))
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("embedded registry: %w", err)
		}
		r.embedded = srv
		r.server = srv.ServerConfig()
		return r, nil
	}
	host, portStr, err := net.SplitHostPort(external)
	port, perr := strconv.ParseUint(portStr, 10, 16)
	if err != nil || perr != nil || host == "" || port == 0 || port > 64535 {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("-nacos %q: want host:port of the Nacos HTTP API (gRPC is port+1000)", external)
	}
	r.server = constant.ServerConfig{IpAddr: host, Port: port}
	return r, nil
}

// describe says which registry the run uses.
func (r *registry) describe() string {
	if r.embedded != nil {
		return "embedded nacostest server at " + r.embedded.Addr()
	}
	return fmt.Sprintf("Nacos at %s:%d (gRPC %d)", r.server.IpAddr, r.server.Port, r.server.Port+1000)
}

// newClient returns a new nacos-sdk-go naming client. It blocks until the
// client is connected (the SDK connects inside NewNamingClient).
func (r *registry) newClient(name string) (naming_client.INamingClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cacheDir := filepath.Join(r.dir, name)
	c, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			TimeoutMs:            2000,
			NotLoadCacheAtStart:  true,
			UpdateCacheWhenEmpty: true, // else an empty list is never delivered
			CacheDir:             cacheDir,
			LogDir:               r.dir, // the SDK writes here only while the client is being built
			LogLevel:             "warn",
			TLSCfg:               constant.TLSConfig{Appointed: true}, // ignore TLS environment variables
		},
		ServerConfigs: []constant.ServerConfig{r.server},
	})
	if r.sdkLevel == zapcore.InvalidLevel {
		_ = nacoslog.Install(nil, zapcore.WarnLevel) // discard
	} else if lerr := nacoslog.Install(r.log.Named("nacos-sdk"), r.sdkLevel); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		return nil, fmt.Errorf("naming client %s: %w", name, err)
	}
	r.clients++
	return c, nil
}

// reconnects reports, for the embedded server, how many connections the
// server opened beyond one per client: 0 means no client reconnected.
func (r *registry) reconnects() (clients int, opened int64, ok bool) {
	if r.embedded == nil {
		return 0, 0, false
	}
	r.mu.Lock()
	clients = r.clients
	r.mu.Unlock()
	return clients, r.embedded.Stats().ConnectionsOpened, true
}

// close stops the embedded server and removes the SDK's files. The SDK may
// still write its cache after CloseClient: nacostest.RemoveDir tolerates it.
func (r *registry) close() error {
	if r.embedded != nil {
		r.embedded.Close()
	}
	return nacostest.RemoveDir(r.dir)
}
