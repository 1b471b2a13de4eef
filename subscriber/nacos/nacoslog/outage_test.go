//go:build !race

// Not under -race: the Nacos client reconnects here, and nacos-sdk-go
// v2.3.2 races in its reconnect path (rpc_client.go, upstream issue 833).

package nacoslog_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	nacoslogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacoslog"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// counting counts the SDK's calls at Warn and above (what the SDK's own
// logger at "warn" would write: one line each), then passes them on.
type counting struct {
	next nacoslogger.Logger
	mu   sync.Mutex
	n    int
}

func (c *counting) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *counting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
func (c *counting) Debug(a ...any)            { c.next.Debug(a...) }
func (c *counting) Info(a ...any)             { c.next.Info(a...) }
func (c *counting) Warn(a ...any)             { c.add(); c.next.Warn(a...) }
func (c *counting) Error(a ...any)            { c.add(); c.next.Error(a...) }
func (c *counting) Debugf(f string, a ...any) { c.next.Debugf(f, a...) }
func (c *counting) Infof(f string, a ...any)  { c.next.Infof(f, a...) }
func (c *counting) Warnf(f string, a ...any)  { c.add(); c.next.Warnf(f, a...) }
func (c *counting) Errorf(f string, a ...any) { c.add(); c.next.Errorf(f, a...) }

// A registry outage with the real SDK: a naming client, a rebound Manager
// with 20 subscriptions through the Nacos adapter, the nacostest server
// stopped for NACOSLOG_OUTAGE (default 15s), then started again. It counts
// the SDK's Warn+ lines and what the bridge (the defaults: Warn, 1m) wrote
// of them in the same run, and extrapolates both to 10 minutes.
func TestRealOutageLineCount(t *testing.T) {
	outage := 15 * time.Second
	if v := os.Getenv("NACOSLOG_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		outage = d
	}
	// Registered first, run last: the SDK's goroutines still log while
	// the client closes; discard that rather than restore the SDK's stderr
	// logger.
	t.Cleanup(func() { _ = nacoslog.Install(nil, zapcore.WarnLevel) })
	// Run second to last: wait for the SDK's goroutines to end, so that
	// none of them logs into a logger installed by a later test or example
	// (ExampleInstall once got this client's "received error event" line,
	// logged by its stream goroutine after CloseClient returned).
	t.Cleanup(func() { nacostest.VerifyNone(t) })
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg := nacostest.ClientConfig(t)
	cfg.TimeoutMs = 2000
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  cfg,
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseClient)

	core, logs := observer.New(zapcore.DebugLevel)
	bridge, err := nacoslog.New(zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	raw := &counting{next: bridge}
	nacoslogger.SetLogger(raw)

	reg, err := nacos.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: 500 * time.Millisecond, Max: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for i := range 20 {
		if _, err := m.Subscribe(t.Context(), subscriber.Key{Service: "svc-" + string(rune('a'+i))}, func([]subscriber.Instance) {}); err != nil {
			t.Fatal(err)
		}
	}
	before, beforeRaw := logs.Len(), raw.count()

	srv.Stop()
	stop := time.NewTimer(outage)
	<-stop.C // the outage itself: real time, the SDK's own timers and sleeps
	rawN, bridged := raw.count()-beforeRaw, logs.Len()-before
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// Let the client reconnect and the Manager confirm everything before
	// the cleanups close them: nacos-sdk-go leaks goroutines when closed in
	// the middle of a reconnect.
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for subscribed := 0; subscribed < 20; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 subscriptions confirmed 2 minutes after the registry came back", subscribed)
		}
		<-tick.C
		subscribed = 0
		for _, st := range m.Status() {
			if st.State == subscriber.StateSubscribed {
				subscribed++
			}
		}
	}

	per10 := func(n int) float64 { return float64(n) * float64(10*time.Minute) / float64(outage) }
	t.Logf("outage %v: SDK Warn+ lines %d (%.1f/s, ~%.0f per 10 min); bridge at Warn wrote %d", outage, rawN,
		float64(rawN)/outage.Seconds(), per10(rawN), bridged)
	if outage >= 10*time.Minute && bridged >= 50 {
		t.Errorf("the bridge wrote %d lines in a %v outage, want under 50", bridged, outage)
	}
	sites := map[string]bool{}
	for _, e := range logs.All()[before:] {
		sites[e.Message[:min(len(e.Message), 40)]] = true
		if e.Level < zapcore.WarnLevel {
			t.Errorf("bridge at Warn wrote %v %q", e.Level, e.Message)
		}
	}
	t.Logf("bridged lines (%d call sites):", len(sites))
	for _, e := range logs.All()[before:] {
		t.Logf("  %s %q %v", e.Level, e.Message, e.ContextMap())
	}
	if bridged > rawN {
		t.Errorf("the bridge wrote %d lines, more than the SDK's %d", bridged, rawN)
	}
}
