package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"go.uber.org/zap/zapcore"

	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacoslog"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// mode is how the consumers subscribe.
type mode int

const (
	naiveMode mode = iota
	reboundMode
	sdkMode
)

func (m mode) String() string {
	switch m {
	case reboundMode:
		return "rebound"
	case sdkMode:
		return "sdk"
	}
	return "naive"
}

// Timing of a run, besides the flags.
const (
	// pollInterval is how often convergence is checked.
	pollInterval = 20 * time.Millisecond
	// setupTimeout bounds each set-up step (clients, registrations,
	// subscriptions, the wait for the registry to go quiet) and closing.
	setupTimeout = 30 * time.Second
	// quietFor is how long the registry must receive no request before the
	// outage starts, so that set-up traffic is not counted in it.
	quietFor = 300 * time.Millisecond
	// canaryTimeout bounds the wait for the change made after the recovery
	// to reach every listener.
	canaryTimeout = 2 * time.Second
	// emptyTimeout bounds the wait for a really emptied service to reach
	// its listeners: the Manager's default empty-list hold plus slack.
	emptyTimeout = 30*time.Second + 15*time.Second
	// plotBefore is how much of the time before the outage the plot shows.
	plotBefore = 2 * time.Second
	// providerPort is the port every provider instance registers.
	providerPort = 8080
)

// result is what one run measured. Durations are zero and counts are
// meaningless when restarted is false.
type result struct {
	mode      mode
	observed  bool // server-side counts are available (embedded registry)
	restarted bool // the registry went down and came back
	cpuOK     bool

	cpuDown  time.Duration // process CPU during the outage
	cpuAfter time.Duration // process CPU during the recovery window
	downFor  time.Duration // the outage, measured
	after    time.Duration // the recovery window: restart -> converged, or the timeout

	converged  bool
	convergeIn time.Duration // restart -> every subscription in place with the right list
	providers  time.Duration // restart -> every provider instance registered again (0: never)
	// confirmedIn: restart -> every subscription at the registry and
	// believed in place by the consumer code, whatever the lists (0: never).
	confirmedIn time.Duration
	// heldIn: restart -> every subscription at the registry (0: never).
	heldIn time.Duration

	// Client-side subscribe calls (naive loop calls, Manager attempts)
	// during the outage and the recovery window.
	attemptsDown, attemptsAfter int64
	// Registry-side SubscribeServiceRequests and all requests during the
	// recovery window, and the most requests in any 100 ms window of it.
	subReqAfter, reqAfter, peakAfter int64
	// rejected is how many SubscribeServiceRequests the registry's TPS
	// control rejected from the restart to the end of the run; regRejected
	// the InstanceRequests (registers).
	rejected, regRejected int64
	// regReqAfter is the InstanceRequests (registers) the registry
	// received during the recovery window.
	regReqAfter int64
	// provMissing is the provider instances (one per provider per
	// service) the registry did not list at the end of the recovery
	// window, of provTotal.
	provMissing, provTotal int

	notInPlace int // subscriptions missing at the registry (or unconfirmed) at the end of the window
	lost       int // listeners whose final list differs from the registry's
	duplicated int // deliveries identical to the previous one to the same listener
	empties    int // empty lists delivered from the outage on, to listeners that had instances
	firstEmpty int // empty first lists, to listeners started during the outage
	gaveUp     int // subscriptions the consumer's code abandoned

	// emptiedIn: a service deregistered for real after the recovery ->
	// every listener that had its list holds the empty list (emptiedOK
	// false: not within emptyTimeout; emptiedObserved false: not measured,
	// an external registry).
	emptiedIn                  time.Duration
	emptiedOK, emptiedObserved bool

	timing timing

	// Per 100 ms window from plotBefore before the outage to the end of
	// the recovery window: registry requests (embedded only) and
	// client-side subscribe calls.
	requests, attempts []int64
}

// timing is how long the phases of a run took, in wall time.
type timing struct {
	setUp, subscribe, outage, recovery, change, closing, total time.Duration
}

// slot is one consumer process: its client, the code subscribing it, and
// one listener per service.
type slot struct {
	client  naming_client.INamingClient
	code    consumer
	watches []*watch
}

// scenario is one run of the outage scenario with one mode.
type scenario struct {
	cfg  config
	mode mode
	prog *progress

	dir      string // temporary: the SDK's cache and log files
	srv      *nacostest.Server
	server   constant.ServerConfig
	meter    *meter  // registry requests (embedded only)
	attempts *series // client-side subscribe calls

	services []string
	// expected is the list every service should have: the providers'
	// instances, plus the canary's once it registered.
	expected         atomic.Pointer[[]string]
	base, withCanary []string

	calls          atomic.Int64 // client-side subscribe calls
	setUpTook      time.Duration
	rejectedBefore nacostest.Stats // the registry's counts before the restart

	providers []naming_client.INamingClient
	regs      []subscriber.Registration   // the providers' registrations (rebound run)
	canary    naming_client.INamingClient // registers the change after the recovery

	mu      sync.Mutex // guards the fields below (progress reads them)
	watches []*watch   // every listener of the run, including replaced ones
	all     []naming_client.INamingClient
	slots   []*slot // the consumers; a slot is complete before it is added
	nextDir int
}

// runScenario runs the scenario once with mode m and returns what it
// measured. Every client, server and goroutine it starts is stopped before
// it returns, except the goroutines nacos-sdk-go never stops.
func runScenario(ctx context.Context, cfg config, m mode, prog *progress) (res result, err error) {
	s := &scenario{cfg: cfg, mode: m, prog: prog}
	start := time.Now()
	defer func() {
		t := time.Now()
		s.prog.phase(s.mode, "closing")
		err = errors.Join(err, s.close())
		res.timing.closing = time.Since(t)
		res.timing.total = time.Since(start)
	}()
	if err := s.setUp(ctx); err != nil {
		return result{}, err
	}
	res, err = s.run(ctx)
	res.timing.setUp = s.setUpTook
	return res, err
}

// span is the longest a run can take, to size its series.
func (c config) span() time.Duration {
	return 5*setupTimeout + restartWait + comeBackSlack + c.down + c.timeout + canaryTimeout + time.Minute
}

func (s *scenario) setUp(ctx context.Context) error {
	start := time.Now()
	defer func() { s.setUpTook = time.Since(start) }()
	dir, err := os.MkdirTemp("", "rebound-outage-")
	if err != nil {
		return err
	}
	s.dir = dir
	s.attempts = newSeries(start, s.cfg.span())
	prefix := "svc-"
	if s.cfg.nacosAddr != "" {
		// A real server holds other services: use names of our own.
		prefix = "rebound-outage-" + strconv.FormatInt(start.UnixNano()%(1<<40), 36) + "-svc-"
	}
	list := func(providers int) string {
		keys := make([]string, providers)
		for p := range providers {
			keys[p] = instanceKey(providerIP(p), providerPort, 1, true, true)
		}
		return listKey(keys)
	}
	for i := range s.cfg.subs {
		s.services = append(s.services, fmt.Sprintf("%s%02d", prefix, i))
		s.base = append(s.base, list(s.cfg.providers))
		s.withCanary = append(s.withCanary, list(s.cfg.providers+1))
	}
	s.expected.Store(&s.base)

	if s.cfg.nacosAddr == "" {
		s.meter = newMeter(start, s.cfg.span())
		srv, err := nacostest.NewServer(nacostest.WithRequestHook(s.meter.request))
		if err != nil {
			return err
		}
		s.srv = srv
		s.server = srv.ServerConfig()
	} else {
		s.server = s.cfg.nacosServer
	}

	s.prog.phase(s.mode, "starting")
	clients, err := s.newClients(ctx, s.cfg.providers+1+s.cfg.clients)
	if err != nil {
		return err
	}
	s.providers, s.canary = clients[:s.cfg.providers], clients[s.cfg.providers]
	// The SDK handles its start-up CONNECTED event asynchronously and may
	// re-send what it has cached then: let that settle before using the
	// clients (see package nacostest).
	if err := s.waitQuiet(ctx); err != nil {
		return err
	}

	s.prog.phase(s.mode, "registering")
	errs := make([]error, len(s.providers))
	var wg sync.WaitGroup
	regs := make([][]subscriber.Registration, len(s.providers))
	for p, c := range s.providers {
		wg.Go(func() {
			switch s.mode {
			case reboundMode:
				regs[p], errs[p] = s.registerRebound(ctx, c, p)
			case naiveMode:
				errs[p] = s.registerNaive(ctx, c, p)
			default:
				errs[p] = s.register(ctx, c, p)
			}
		})
	}
	wg.Wait()
	for _, r := range regs {
		s.regs = append(s.regs, r...)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	slots := make([]*slot, 0, s.cfg.clients)
	for _, c := range clients[s.cfg.providers+1:] {
		sl := &slot{client: c}
		if err := s.newCode(sl); err != nil {
			return err
		}
		slots = append(slots, sl)
	}
	s.mu.Lock()
	s.slots = slots
	s.mu.Unlock()
	return nil
}

// newCode gives a slot the subscribing code of the run's mode and fresh
// listeners.
func (s *scenario) newCode(sl *slot) error {
	switch s.mode {
	case sdkMode:
		sl.code = newSDKConsumer(sl.client, s.attempted)
	case naiveMode:
		sl.code = newNaiveConsumer(sl.client, s.cfg.naiveNoSleep, s.cfg.noSleepCap, s.attempted)
	case reboundMode:
		rc, err := newReboundConsumer(sl.client, s.cfg.policy(), s.attempted, s.cfg.live.options()...)
		if err != nil {
			return err
		}
		sl.code = rc
		s.cfg.live.add(rc)
	}
	sl.watches = make([]*watch, len(s.services))
	for j := range s.services {
		sl.watches[j] = &watch{}
	}
	s.mu.Lock()
	s.watches = append(s.watches, sl.watches...)
	s.mu.Unlock()
	return nil
}

func (s *scenario) attempted() {
	s.calls.Add(1)
	s.attempts.add(time.Now())
}

// providerIP is the address provider p registers in every service.
func providerIP(p int) string { return fmt.Sprintf("10.0.%d.%d", p/250, p%250+1) }

// newClients creates n naming clients, a few at a time (each takes about
// 100 ms to connect). Every client created is closed by close.
func (s *scenario) newClients(ctx context.Context, n int) ([]naming_client.INamingClient, error) {
	out := make([]naming_client.INamingClient, n)
	errs := make([]error, n)
	s.mu.Lock()
	first := s.nextDir
	s.nextDir += n
	s.mu.Unlock()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			out[i], errs[i] = newClient(s.server, filepath.Join(s.dir, "cache", strconv.Itoa(first+i)),
				filepath.Join(s.dir, "log"), s.cfg.updateCacheWhenEmpty)
		})
	}
	wg.Wait()
	// Every NewNamingClient points the SDK's global logger at a file;
	// discard what it logs from now on (its log is not what is measured).
	_ = nacoslog.Install(nil, zapcore.WarnLevel) // a nil logger discards; Warn is a valid level
	s.mu.Lock()
	for _, c := range out {
		if c != nil {
			s.all = append(s.all, c)
		}
	}
	s.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("creating nacos-sdk-go clients: %w", err)
	}
	return out, nil
}

// newClient creates a nacos-sdk-go naming client with the SDK's defaults,
// except for where it writes its files, TLS taken from the configuration
// only (not the environment), and UpdateCacheWhenEmpty.
func newClient(server constant.ServerConfig, cacheDir, logDir string, updateCacheWhenEmpty bool) (naming_client.INamingClient, error) {
	return clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			NotLoadCacheAtStart:  true,
			UpdateCacheWhenEmpty: updateCacheWhenEmpty,
			CacheDir:             cacheDir,
			LogDir:               logDir,
			LogLevel:             "error",
			TLSCfg:               constant.TLSConfig{Appointed: true},
		},
		ServerConfigs: []constant.ServerConfig{server},
	})
}

// register makes provider p register its ephemeral instance in every
// service, through its own client: the SDK registers it again after each
// reconnect.
func (s *scenario) register(ctx context.Context, c naming_client.INamingClient, p int) error {
	for _, svc := range s.services {
		if err := ctx.Err(); err != nil {
			return err
		}
		ok, err := c.RegisterInstance(s.providerParam(p, svc))
		if err == nil && !ok {
			err = errors.New("the registry refused it")
		}
		if err != nil {
			return fmt.Errorf("provider %d registering in %s: %w", p, svc, err)
		}
	}
	return nil
}

// providerParam is provider p's instance in svc, as the SDK registers it.
func (s *scenario) providerParam(p int, svc string) vo.RegisterInstanceParam {
	return vo.RegisterInstanceParam{
		Ip: providerIP(p), Port: providerPort, ServiceName: svc, Weight: 1,
		Enable: true, Healthy: true, Ephemeral: true,
		Metadata: map[string]string{"provider": strconv.Itoa(p)},
	}
}

// registerNaive is the naive provider's code: in every service, register
// until the call returns no error, 1 s apart; the returned bool (false
// when the server rejected the request) is not looked at, and after that
// nacos-sdk-go's redo re-registers after each reconnect.
func (s *scenario) registerNaive(ctx context.Context, c naming_client.INamingClient, p int) error {
	for _, svc := range s.services {
		for {
			_, err := c.RegisterInstance(s.providerParam(p, svc))
			if err == nil {
				break
			}
			if err := sleepCtx(ctx, time.Second); err != nil {
				return err
			}
		}
	}
	return nil
}

// registerRebound registers provider p's instance in every service with
// nacos.Register, which keeps it registered.
func (s *scenario) registerRebound(ctx context.Context, c naming_client.INamingClient, p int) ([]subscriber.Registration, error) {
	var regs []subscriber.Registration
	for _, svc := range s.services {
		g, err := nacos.Register(ctx, c, subscriber.Key{Service: svc}, subscriber.Instance{
			IP: providerIP(p), Port: providerPort, Weight: 1, Healthy: true, Enabled: true,
			Metadata: map[string]string{"provider": strconv.Itoa(p)},
		})
		if err != nil {
			return regs, fmt.Errorf("provider %d registering in %s: %w", p, svc, err)
		}
		regs = append(regs, g)
	}
	return regs, nil
}

// closeRegs stops the rebound providers' repair (their instances stay
// registered until their clients close).
func (s *scenario) closeRegs() error {
	var errs []error
	for _, g := range s.regs {
		errs = append(errs, g.Close())
	}
	s.regs = nil
	return errors.Join(errs...)
}

// missingProviders counts the provider instances the embedded registry
// does not list, of one per provider per service.
func (s *scenario) missingProviders() (missing, total int) {
	total = s.cfg.providers * len(s.services)
	if s.srv == nil || !s.srv.Running() {
		return 0, total
	}
	for _, svc := range s.services {
		listed := map[string]bool{}
		for _, in := range s.srv.Instances("", "", svc) {
			listed[in.Ip] = true
		}
		for p := range s.cfg.providers {
			if !listed[providerIP(p)] {
				missing++
			}
		}
	}
	return missing, total
}

// waitQuiet waits until the embedded registry has received no request for
// quietFor (no-op with an external registry).
func (s *scenario) waitQuiet(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	last, since := s.srv.Stats().TotalRequests, time.Now()
	return poll(ctx, setupTimeout, "the registry to be quiet", func() bool {
		if n := s.srv.Stats().TotalRequests; n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quietFor
	})
}

// poll checks cond every pollInterval until it holds; it fails after
// timeout or when ctx is done.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	if err := pollEvery(ctx, timeout, pollInterval, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// errTimeout is returned (wrapped) by pollEvery when the condition did not
// hold in time.
var errTimeout = errors.New("timed out")

// pollEvery checks cond every interval until it holds; it returns
// errTimeout (wrapped) after timeout, or ctx's cause when ctx is done.
func pollEvery(ctx context.Context, timeout, interval time.Duration, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-deadline.C:
			return fmt.Errorf("%w after %v", errTimeout, timeout)
		case <-tick.C:
		}
	}
	return nil
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// state is a snapshot of the consumers' view and the registry's.
type state struct {
	total     int // subscriptions
	confirmed int // in place at the registry if observable, else as the consumers' code believes
	correct   int // listeners whose last list is what the registry holds
	truthOK   bool
	codeAll   bool // the consumers' code believes every subscription is in place
}

func (st state) done() bool {
	return st.truthOK && st.codeAll && st.confirmed == st.total && st.correct == st.total
}

// truth is the canonical list of each service at the registry: what the
// embedded server holds (the expected lists while it is down), or the
// expected lists on an external one, which cannot be read without
// subscribing.
func (s *scenario) truth() []string {
	expected := *s.expected.Load()
	if s.srv == nil || !s.srv.Running() {
		return expected
	}
	out := make([]string, len(s.services))
	for j, svc := range s.services {
		out[j] = sdkKey(s.srv.Instances("", "", svc))
	}
	return out
}

func (s *scenario) currentSlots() []*slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*slot(nil), s.slots...)
}

func (s *scenario) snapshot() state {
	expected := *s.expected.Load()
	truth := s.truth()
	slots := s.currentSlots()
	st := state{total: len(slots) * len(s.services), truthOK: true}
	for j := range s.services {
		if truth[j] != expected[j] {
			st.truthOK = false
		}
	}
	code := 0
	for _, sl := range slots {
		code += sl.code.confirmed()
		for j, w := range sl.watches {
			if ws := w.stats(); ws.has && ws.last == truth[j] {
				st.correct++
			}
		}
	}
	st.codeAll = code == st.total
	switch {
	case s.srv == nil:
		st.confirmed = code
	case s.srv.Running():
		for _, svc := range s.services {
			st.confirmed += min(s.srv.SubscriberCount("", "", svc), len(slots))
		}
	}
	return st
}

// requestRate is the registry's requests per second over the last second
// (embedded registry only).
func (s *scenario) requestRate() (float64, bool) {
	if s.meter == nil {
		return 0, false
	}
	now := time.Now()
	return float64(s.meter.all.sum(now.Add(-time.Second), now)), true
}

// mark is the counters at one instant.
type mark struct {
	t          time.Time
	cpu        time.Duration
	cpuOK      bool
	attempts   int64
	empties    int
	firstEmpty int
}

func (s *scenario) mark() mark {
	m := mark{t: time.Now(), attempts: s.calls.Load()}
	s.mu.Lock()
	watches := s.watches
	s.mu.Unlock()
	for _, w := range watches {
		st := w.stats()
		m.empties += st.empties
		m.firstEmpty += st.firstEmpties
	}
	m.cpu, m.cpuOK = cpuTime()
	return m
}

func (s *scenario) run(ctx context.Context) (result, error) {
	res := result{mode: s.mode, observed: s.srv != nil}
	s.prog.track(s.mode, s.snapshot, s.requestRate)
	defer s.prog.untrack()

	s.prog.phase(s.mode, "subscribing")
	t := time.Now()
	for _, sl := range s.currentSlots() {
		if err := sl.code.start(s.services, sl.watches); err != nil {
			return res, err
		}
	}
	if err := poll(ctx, setupTimeout, "every subscription to be in place with the providers' instances",
		func() bool { return s.snapshot().done() }); err != nil {
		return res, err
	}
	if err := s.waitQuiet(ctx); err != nil {
		return res, err
	}
	res.timing.subscribe = time.Since(t)

	t = time.Now()
	down, up, err := s.outage(ctx)
	res.timing.outage = time.Since(t)
	if err != nil || down.t.IsZero() {
		return res, err
	}
	res.restarted = true
	res.downFor = up.t.Sub(down.t)
	res.cpuOK = down.cpuOK && up.cpuOK
	res.cpuDown = up.cpu - down.cpu
	res.attemptsDown = up.attempts - down.attempts

	// The recovery window: until every subscription is in place again with
	// the right list, or the timeout.
	s.prog.phase(s.mode, "recovering")
	// Not converging within the timeout is a result (res.converged stays
	// false and the table says so), not an error of the run.
	_ = poll(ctx, s.cfg.timeout, "convergence", func() bool {
		st := s.snapshot()
		if st.truthOK && res.providers == 0 {
			res.providers = time.Since(up.t)
		}
		if st.confirmed == st.total && res.heldIn == 0 {
			res.heldIn = time.Since(up.t)
		}
		if st.codeAll && st.confirmed == st.total && res.confirmedIn == 0 {
			res.confirmedIn = time.Since(up.t)
		}
		if st.done() {
			res.converged, res.convergeIn = true, time.Since(up.t)
			return true
		}
		return false
	})
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	if !res.converged {
		s.dumpUnconverged(up.t)
	}
	end := s.mark()
	res.timing.recovery = time.Since(up.t)
	res.after = end.t.Sub(up.t)
	if res.cpuOK && end.cpuOK {
		res.cpuAfter = end.cpu - up.cpu
	}
	res.attemptsAfter = end.attempts - up.attempts
	st := s.snapshot()
	res.notInPlace = st.total - st.confirmed
	res.provMissing, res.provTotal = s.missingProviders()
	from := down.t.Add(-plotBefore)
	// Up to the end of the bucket the window ends in.
	if last := end.t.Add(bucket); s.meter != nil {
		res.subReqAfter = s.meter.subscribe.sum(up.t, last)
		res.regReqAfter = s.meter.register.sum(up.t, last)
		res.reqAfter = s.meter.all.sum(up.t, last)
		res.peakAfter = s.meter.all.peak(up.t, last)
		res.requests = s.meter.all.windows(from, last)
	}
	res.attempts = s.attempts.windows(from, end.t.Add(bucket))

	// The canary: a change made after the recovery must reach every
	// listener; one whose subscription is not in place misses it.
	t = time.Now()
	if err := s.canaryChange(ctx); err != nil {
		return res, err
	}
	res.timing.change = time.Since(t)
	if s.srv != nil {
		st := s.srv.Stats()
		res.rejected = st.Rejected[nacostest.RequestSubscribeService] - s.rejectedBefore.Rejected[nacostest.RequestSubscribeService]
		res.regRejected = st.Rejected[nacostest.RequestInstance] - s.rejectedBefore.Rejected[nacostest.RequestInstance]
	}
	final := s.mark()
	res.empties = final.empties - down.empties
	res.firstEmpty = final.firstEmpty - down.firstEmpty
	truth := s.truth()
	for _, sl := range s.currentSlots() {
		res.gaveUp += sl.code.gaveUp()
		for j, w := range sl.watches {
			if ws := w.stats(); !ws.has || ws.last != truth[j] {
				res.lost++
			}
		}
	}
	s.mu.Lock()
	watches := s.watches
	s.mu.Unlock()
	for _, w := range watches {
		res.duplicated += w.stats().duplicates
	}

	// The price of the empty-list hold, measured last so that it changes
	// no other row: one service loses every instance for real, soon after
	// the recovery.
	if s.srv != nil && s.cfg.emptied {
		res.emptiedObserved = true
		res.emptiedIn, res.emptiedOK, err = s.emptyService(ctx)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// emptyService deregisters every instance of the first service at the
// embedded registry and measures how long it takes until every listener
// that had the service's list (its subscription in place) holds the empty
// list. The SDK delivers it with the push; rebound's Manager, within
// WithEmptyListHold of a reconnect, cannot tell this deregistration from a
// restarted registry's empty list and delivers it when the hold ends.
func (s *scenario) emptyService(ctx context.Context) (time.Duration, bool, error) {
	s.prog.phase(s.mode, "service emptied")
	svc, truth := s.services[0], s.truth()[0]
	var ws []*watch
	for _, sl := range s.currentSlots() {
		if st := sl.watches[0].stats(); st.has && st.last == truth {
			ws = append(ws, sl.watches[0])
		}
	}
	// rebound's registrations would repair the deregistered instances:
	// stop them first (the instances stay registered).
	if err := s.closeRegs(); err != nil {
		return 0, false, err
	}
	start := time.Now()
	for _, in := range s.srv.Instances("", "", svc) {
		s.srv.DeregisterInstance("", "", svc, nacostest.Instance{Ip: in.Ip, Port: in.Port, ClusterName: in.ClusterName})
	}
	err := poll(ctx, emptyTimeout, "the emptied service to reach every listener", func() bool {
		for _, w := range ws {
			if st := w.stats(); st.last != "" {
				return false
			}
		}
		return true
	})
	if ctx.Err() != nil {
		return 0, false, context.Cause(ctx)
	}
	if err != nil && !errors.Is(err, errTimeout) {
		return 0, false, err
	}
	return time.Since(start), err == nil, nil
}

// canaryChange registers one more provider instance in every service and
// waits (up to canaryTimeout) for every listener to receive it.
func (s *scenario) canaryChange(ctx context.Context) error {
	s.prog.phase(s.mode, "change")
	s.expected.Store(&s.withCanary)
	// The canary's connection is new since the restart: the TPS control
	// may reject its first registers; retry those (the canary measures
	// the consumers, not the providers).
	err := pollEvery(ctx, canaryTimeout, pollInterval, func() bool {
		return s.register(ctx, s.canary, s.cfg.providers) == nil
	})
	if err != nil {
		return fmt.Errorf("registering the change after the recovery: %w", err)
	}
	err = poll(ctx, canaryTimeout, "the change to reach every listener", func() bool {
		st := s.snapshot()
		return st.truthOK && st.correct == st.total
	})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil && !errors.Is(err, errTimeout) {
		return err
	}
	return nil
}

// outage takes the registry down for cfg.down and brings it back empty
// (embedded), or waits for the user to restart it (external). It returns
// the marks at the moment it went down and came back; zero marks if an
// external registry was not restarted in time.
func (s *scenario) outage(ctx context.Context) (down, up mark, err error) {
	if s.srv == nil {
		return s.externalOutage(ctx)
	}
	s.prog.phase(s.mode, "registry down")
	down = s.mark()
	s.srv.Stop()
	if err := s.restartConsumers(ctx); err != nil {
		return down, up, err
	}
	if err := sleepCtx(ctx, time.Until(down.t.Add(s.cfg.down))); err != nil {
		return down, up, err
	}
	up = s.mark()
	if s.cfg.tpsFirst > 0 {
		// The restarted registry's TPS control trips on the reconnect
		// storm: the first N subscribes of every new connection are
		// rejected in Nacos' own response type.
		if err := s.srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{FirstPerConnection: s.cfg.tpsFirst}); err != nil {
			return down, up, err
		}
	}
	if s.cfg.regReject > 0 {
		// ... and the first N registers: an InstanceResponse with
		// success false, which nacos-sdk-go's redo counts as done.
		if err := s.srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{FirstPerConnection: s.cfg.regReject}); err != nil {
			return down, up, err
		}
	}
	s.rejectedBefore = s.srv.Stats()
	if err := s.srv.Start(); err != nil {
		return down, up, fmt.Errorf("restarting the registry: %w", err)
	}
	return down, up, nil
}

// restartConsumers replaces the first cfg.restarts consumers with new
// processes while the registry is down: their clients are closed (as if
// killed, without unsubscribing), and new clients with new listeners
// start subscribing at once.
func (s *scenario) restartConsumers(ctx context.Context) error {
	k := min(s.cfg.restarts, s.cfg.clients)
	if k == 0 {
		return nil
	}
	old := s.currentSlots()[:k]
	for _, sl := range old {
		sl.client.CloseClient()
	}
	stopCtx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	for _, sl := range old {
		if err := sl.code.close(stopCtx); err != nil {
			return err
		}
	}
	clients, err := s.newClients(ctx, k)
	if err != nil {
		return err
	}
	for i, c := range clients {
		sl := &slot{client: c}
		if err := s.newCode(sl); err != nil {
			return err
		}
		s.mu.Lock()
		s.slots[i] = sl
		s.mu.Unlock()
		if err := sl.code.start(s.services, sl.watches); err != nil {
			return err
		}
	}
	return nil
}

// close stops the consumers' code, closes every client and the registry,
// and removes the temporary files.
func (s *scenario) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	slots := s.currentSlots()
	errs := make([]error, len(slots)+1)
	var wg sync.WaitGroup
	for i, sl := range slots {
		if sl.code != nil {
			wg.Go(func() { errs[i] = sl.code.close(ctx) })
		}
	}
	wg.Wait()
	errs = append(errs, s.closeRegs()) // before their clients
	// CloseClient can block for seconds inside nacos-sdk-go (its Shutdown
	// waits for the client's event goroutine, which may be busy re-sending
	// its subscriptions): close the clients concurrently.
	s.mu.Lock()
	all := s.all
	s.mu.Unlock()
	for _, c := range all {
		wg.Go(c.CloseClient)
	}
	wg.Wait()
	if s.srv != nil {
		s.srv.Close()
	}
	if s.dir != "" {
		errs[len(slots)] = nacostest.RemoveDir(s.dir) // the SDK may write after CloseClient
	}
	return errors.Join(errs...)
}

// dumpUnconverged writes, on the progress output (stderr), where every
// subscription that kept the run from converging stands: the consumer's
// code view (rebound: the Manager's Status of each subscription not
// subscribed), the registry's subscriber counts and the listeners whose
// last list is not the registry's.
func (s *scenario) dumpUnconverged(up time.Time) {
	s.prog.note("%s: not converged %v after the restart (restart at %s):", s.mode, time.Since(up).Round(time.Millisecond), up.Format("15:04:05.000"))
	truth := s.truth()
	for i, sl := range s.currentSlots() {
		if u, ok := sl.code.(interface{ unconfirmed() []string }); ok {
			for _, line := range u.unconfirmed() {
				s.prog.note("  consumer %d: %s", i, line)
			}
		}
		for j, w := range sl.watches {
			if ws := w.stats(); !ws.has || ws.last != truth[j] {
				s.prog.note("  consumer %d: listener of %s has %q (has=%v), registry %q", i, s.services[j], ws.last, ws.has, truth[j])
			}
		}
	}
	if s.srv != nil && s.srv.Running() {
		for _, svc := range s.services {
			s.prog.note("  registry: %s subscribers=%d", svc, s.srv.SubscriberCount("", "", svc))
		}
	}
}
