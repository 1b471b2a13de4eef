package main

import (
	"flag"
	"fmt"
	"io"
	"net"
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
	defaultOut       = "outage.png"
)

// config is the parsed flags.
type config struct {
	clients, subs, providers int
	restarts                 int
	down, timeout            time.Duration
	naiveNoSleep             bool
	noSleepCap               int
	jitter                   rebound.Jitter
	updateCacheWhenEmpty     bool
	nacosAddr                string
	nacosServer              constant.ServerConfig // from nacosAddr
	out                      string
	modes                    []mode
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
	fs.IntVar(&c.restarts, "restarts", 0, "consumers restarted (new process, new client) while the registry is down")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "how long to wait, after the restart, for every subscription to converge")
	fs.BoolVar(&c.naiveNoSleep, "naive-nosleep", false, "naive loop without the 1 s sleep (retries at once, at most -nosleep-cap calls per service)")
	fs.IntVar(&c.noSleepCap, "nosleep-cap", defaultCap, "with -naive-nosleep: give up a service after this many Subscribe calls")
	jitter := fs.String("jitter", "full", "rebound's jitter: full (the default policy), equal, decorrelated or none")
	fs.BoolVar(&c.updateCacheWhenEmpty, "update-cache-when-empty", true, "nacos-sdk-go's ClientConfig.UpdateCacheWhenEmpty, for both runs (false: an empty list is never delivered)")
	fs.StringVar(&c.nacosAddr, "nacos", "", "host:port (HTTP port, gRPC at +1000) of a real Nacos server to use instead of the embedded one; you restart it by hand")
	fs.StringVar(&c.out, "out", defaultOut, `path of the PNG to write; "" = none`)
	only := fs.String("only", "", `run only "naive" or only "rebound" (default both)`)
	if err := fs.Parse(args); err != nil {
		return c, err
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
		c.modes = []mode{naiveMode, reboundMode}
	case "naive":
		c.modes = []mode{naiveMode}
	case "rebound":
		c.modes = []mode{reboundMode}
	default:
		return c, fmt.Errorf("-only %q: must be naive or rebound", *only)
	}
	if c.nacosAddr != "" {
		sc, err := parseNacosAddr(c.nacosAddr)
		if err != nil {
			return c, err
		}
		c.nacosServer = sc
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
