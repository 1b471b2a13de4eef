package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"

	"github.com/rebound-go/rebound"
)

// Defaults of the flags.
const (
	defaultClients   = 20
	defaultSubs      = 50
	defaultProviders = 3
	defaultDown      = 10 * time.Second
	defaultTimeout   = 10 * time.Second
	defaultCap       = 1000
	defaultOutName   = "outage.png" // in the OS temp dir (os.TempDir)
	defaultRestarts  = 2
	defaultTPSFirst  = 10
	defaultRegReject = 1
)

// config is the parsed flags.
type config struct {
	clients, subs, providers int
	restarts                 int
	tpsFirst                 int  // TPS control rejects the first N subscribes of each new connection after the restart
	regReject                int  // ... and the first N registers (InstanceRequests) of each new connection
	clean                    bool // -clean: a clean restart (no TPS rejection, no consumer restarted)
	down, timeout            time.Duration
	naiveNoSleep             bool
	noSleepCap               int
	jitter                   rebound.Jitter
	updateCacheWhenEmpty     bool
	nacosAddr                string
	nacosServer              constant.ServerConfig // from nacosAddr
	out                      string
	modes                    []mode
	serve                    string // -serve: status page and metrics address (serve.go)
	keep                     bool   // -keep: serve on after the scenario
	verbose                  bool   // -v: progress on stderr
	emptied                  bool   // -emptied: measure the empty-list hold's price (embedded registry only)
	live                     *live  // the status page's source; nil without -serve
}

var jitters = map[string]rebound.Jitter{
	"full":         rebound.FullJitter,
	"equal":        rebound.EqualJitter,
	"decorrelated": rebound.DecorrelatedJitter,
	"none":         rebound.NoJitter,
}

func jitterName(j rebound.Jitter) string {
	for name, v := range jitters {
		if v == j {
			return name
		}
	}
	return strconv.Itoa(int(j))
}

// policy is the Manager's retry policy: rebound's defaults (1 s doubling,
// capped at 30 s, unlimited attempts) with the -jitter strategy.
func (c config) policy() rebound.Policy { return rebound.Policy{Jitter: c.jitter} }

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("outage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./examples/outage [flags]\n\n%s\nFlags:\n", usageSummary)
		fs.PrintDefaults()
	}
	fs.IntVar(&c.clients, "clients", defaultClients, "consumer processes, each with its own nacos-sdk-go client")
	fs.IntVar(&c.subs, "subs", defaultSubs, "services: each consumer subscribes to every one, each provider registers in every one")
	fs.IntVar(&c.providers, "providers", defaultProviders, "provider processes, each registering one instance per service")
	fs.DurationVar(&c.down, "down", defaultDown, "how long the registry is down")
	fs.IntVar(&c.restarts, "restarts", defaultRestarts, "consumers restarted (new process, new client) while the registry is down")
	fs.IntVar(&c.tpsFirst, "tps-reject", defaultTPSFirst, "the restarted registry's TPS control rejects the first N SubscribeServiceRequests of every new connection (Nacos' own response type, reported as success by nacos-sdk-go); 0 = none")
	fs.IntVar(&c.regReject, "tps-reject-register", defaultRegReject, "the restarted registry's TPS control also rejects the first N InstanceRequests (registers) of every new connection (an InstanceResponse with success false: nacos-sdk-go's redo counts it as done); 0 = none")
	fs.BoolVar(&c.clean, "clean", false, "a clean restart: no TPS rejection and no consumer restarted (sets -tps-reject 0 -tps-reject-register 0 -restarts 0)")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "how long to wait, after the restart, for every subscription to converge")
	fs.BoolVar(&c.naiveNoSleep, "naive-nosleep", false, "naive loop without the 1 s sleep (retries at once, at most -nosleep-cap calls per service)")
	fs.IntVar(&c.noSleepCap, "nosleep-cap", defaultCap, "with -naive-nosleep: give up a service after this many Subscribe calls")
	jitter := fs.String("jitter", "full", "rebound's jitter: full (the default policy), equal, decorrelated or none")
	fs.BoolVar(&c.updateCacheWhenEmpty, "update-cache-when-empty", true, "nacos-sdk-go's ClientConfig.UpdateCacheWhenEmpty, for both runs (false: an empty list is never delivered)")
	fs.StringVar(&c.nacosAddr, "nacos", "", "host:port (HTTP port, gRPC at +1000) of a real Nacos server to use instead of the embedded one; you restart it by hand")
	fs.StringVar(&c.out, "out", filepath.Join(os.TempDir(), defaultOutName), `path of the PNG to write; "" = none`)
	only := fs.String("only", "", `run only "sdk", "naive" or "rebound" (default all three)`)
	fs.StringVar(&c.serve, "serve", "", "host:port (e.g. 127.0.0.1:8080) to serve the status page (/debug/rebound) and Prometheus metrics (/metrics) on while the program runs")
	fs.BoolVar(&c.keep, "keep", false, "with -serve: keep serving after the scenario, until interrupted")
	fs.BoolVar(&c.emptied, "emptied", true, "at the end of each run, deregister every instance of one service and time how long until its listeners see it empty (the price of rebound's empty-list hold: adds up to 30 s to the rebound run); embedded registry only")
	fs.BoolVar(&c.verbose, "v", false, "write progress, per-run timings and what did not converge to stderr (default: only the table, on stdout)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.clean {
		conflict := ""
		fs.Visit(func(f *flag.Flag) {
			if (f.Name == "restarts" && c.restarts != 0) || (f.Name == "tps-reject" && c.tpsFirst != 0) ||
				(f.Name == "tps-reject-register" && c.regReject != 0) {
				conflict = f.Name
			}
		})
		if conflict != "" {
			return c, fmt.Errorf("-clean with -%s: a clean restart has no TPS rejection and no consumer restart", conflict)
		}
		c.restarts, c.tpsFirst, c.regReject = 0, 0, 0
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	positive := func(name string, v, maxV int) error {
		if v < 1 || v > maxV {
			return fmt.Errorf("-%s %d: must be between 1 and %d", name, v, maxV)
		}
		return nil
	}
	if err := positive("clients", c.clients, 1000); err != nil {
		return c, err
	}
	if err := positive("subs", c.subs, 1000); err != nil {
		return c, err
	}
	if err := positive("providers", c.providers, 250); err != nil {
		return c, err
	}
	if c.restarts < 0 || c.restarts > c.clients {
		return c, fmt.Errorf("-restarts %d: must be between 0 and -clients (%d)", c.restarts, c.clients)
	}
	if c.tpsFirst < 0 || c.tpsFirst > 1_000_000 {
		return c, fmt.Errorf("-tps-reject %d: must be between 0 and 1000000", c.tpsFirst)
	}
	if c.regReject < 0 || c.regReject > 1_000_000 {
		return c, fmt.Errorf("-tps-reject-register %d: must be between 0 and 1000000", c.regReject)
	}
	if err := positive("nosleep-cap", c.noSleepCap, 1_000_000); err != nil {
		return c, err
	}
	if c.down < 100*time.Millisecond || c.down > time.Hour {
		return c, fmt.Errorf("-down %v: must be between 100ms and 1h", c.down)
	}
	if c.timeout < time.Second || c.timeout > time.Hour {
		return c, fmt.Errorf("-timeout %v: must be between 1s and 1h", c.timeout)
	}
	j, ok := jitters[*jitter]
	if !ok {
		return c, fmt.Errorf("-jitter %q: must be full, equal, decorrelated or none", *jitter)
	}
	c.jitter = j
	switch *only {
	case "":
		c.modes = []mode{sdkMode, naiveMode, reboundMode}
	case "sdk":
		c.modes = []mode{sdkMode}
	case "naive":
		c.modes = []mode{naiveMode}
	case "rebound":
		c.modes = []mode{reboundMode}
	default:
		return c, fmt.Errorf("-only %q: must be sdk, naive or rebound", *only)
	}
	if c.keep && c.serve == "" {
		return c, fmt.Errorf("-keep needs -serve")
	}
	if c.serve != "" {
		c.live = newLive()
	}
	if c.nacosAddr != "" {
		sc, err := parseNacosAddr(c.nacosAddr)
		if err != nil {
			return c, err
		}
		c.nacosServer = sc
		tpsSet, regSet := false, false
		fs.Visit(func(f *flag.Flag) {
			tpsSet = tpsSet || f.Name == "tps-reject"
			regSet = regSet || f.Name == "tps-reject-register"
		})
		switch {
		case tpsSet && c.tpsFirst > 0:
			return c, fmt.Errorf("-tps-reject %d with -nacos: TPS rejections are injected by the embedded registry only", c.tpsFirst)
		case regSet && c.regReject > 0:
			return c, fmt.Errorf("-tps-reject-register %d with -nacos: TPS rejections are injected by the embedded registry only", c.regReject)
		}
		if !tpsSet {
			c.tpsFirst = 0 // a real server has its own TPS control
		}
		if !regSet {
			c.regReject = 0
		}
	}
	return c, nil
}

// parseNacosAddr parses -nacos: "host:port" with the server's HTTP port
// (nacos-sdk-go dials gRPC at port+1000, Nacos' default layout).
func parseNacosAddr(addr string) (constant.ServerConfig, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return constant.ServerConfig{}, fmt.Errorf("-nacos %q: want host:port: %w", addr, err)
	}
	if host == "" {
		return constant.ServerConfig{}, fmt.Errorf("-nacos %q: the host is empty", addr)
	}
	if strings.Contains(host, ":") {
		return constant.ServerConfig{}, fmt.Errorf("-nacos %q: IPv6 literals are not supported by nacos-sdk-go; use a host name or an IPv4 address", addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || p+constant.RpcPortOffset > 65535 {
		return constant.ServerConfig{}, fmt.Errorf("-nacos %q: the port must be a number from 1 to %d (its gRPC port, +%d, must exist too)",
			addr, 65535-constant.RpcPortOffset, constant.RpcPortOffset)
	}
	return constant.ServerConfig{IpAddr: host, Port: p}, nil
}
