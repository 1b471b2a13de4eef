package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// errAccounting is returned by run when the accounting does not add up.
var errAccounting = errors.New("accounting identity does not hold")

// run parses args, plays the scenario and prints its timeline and
// accounting to stdout; logs go to stderr. It returns when everything it
// started has stopped. Cancelling ctx stops sending; the run then shuts down
// and reports as usual.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	s := &scenario{
		cfg:   cfg,
		out:   &printer{w: stdout, start: time.Now()},
		log:   newLogger(stderr, cfg.logLevel),
		rec:   newReceipts(),
		led:   newLedger(cfg.n),
		ports: map[int]bool{},
	}
	defer func() { _ = s.log.Sync() }()
	return s.play(ctx)
}

// printer writes timeline lines, from several goroutines.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

// event prints a timeline line stamped with the time since the start.
func (p *printer) event(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "t=%6.2fs  %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, a...))
}

func (p *printer) printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, a...)
}

// scenario is one run: a registry, providers, and a consumer sending
// notifications through a failback invoker over a registry-fed directory.
type scenario struct {
	cfg config
	out *printer
	log *zap.Logger
	rec *receipts
	led *ledger

	reg *registry

	mu        sync.Mutex
	providers []*provider // every provider started, in order
	ports     map[int]bool
	serving   []*provider // the ones currently serving

	// The consumer.
	client naming_client.INamingClient
	nreg   *nacos.Registry
	mgr    *subscriber.Manager
	dir    *cluster.RegistryDirectory
	fb     *failback.Invoker
}

func (s *scenario) play(ctx context.Context) (err error) {
	cfg := s.cfg
	// Everything started is stopped on every path; the normal path calls
	// shutdown itself to report on it, which makes this a no-op.
	defer func() { err = errors.Join(err, s.shutdown(false)) }()

	sdkLevel, _ := parseLevel(cfg.sdkLog)
	s.reg, err = openRegistry(cfg.nacos, s.log, sdkLevel)
	if err != nil {
		return err
	}
	s.out.printf("rebound RPC example: %d notifications at %g/s to %d HTTP providers of %q\nregistry: %s\n",
		cfg.n, cfg.rate, cfg.providers, cfg.service, s.reg.describe())

	for i := range cfg.providers {
		p, err := s.startProvider(fmt.Sprintf("p%d", i+1))
		if err != nil {
			return err
		}
		s.out.event("provider %s serving on %s, registered", p.name, p.addr)
	}
	if err := s.startConsumer(ctx); err != nil {
		return err
	}

	stopProgress := s.startProgress()
	// crash is closed by send at the crash point; noCrash after sending if
	// it never got there (-crash=false, interrupted). Only one is closed.
	crash, noCrash := make(chan struct{}), make(chan struct{})
	chaosDone := make(chan struct{})
	go s.chaos(ctx, crash, noCrash, chaosDone)

	start := time.Now()
	sent := s.send(ctx, crash)
	elapsed := time.Since(start)
	s.out.event("sent %d notifications in %.2fs (%.1f/s)", sent, elapsed.Seconds(), float64(sent)/elapsed.Seconds())
	select {
	case <-crash:
	default:
		close(noCrash)
	}
	<-chaosDone
	s.drain(ctx)
	stopProgress()

	shutdownErr := s.shutdown(true)
	r := s.led.buildReport(cfg.retries, s.fb.Stats(), s.rec.snapshot())
	r.print(s.out.w)
	s.printProviders()
	if !r.identityHolds() || !r.statsAgree() {
		return errors.Join(shutdownErr, errAccounting)
	}
	return shutdownErr
}

func (s *scenario) startProvider(name string) (*provider, error) {
	s.mu.Lock()
	avoid := make(map[int]bool, len(s.ports))
	for p := range s.ports {
		avoid[p] = true
	}
	s.mu.Unlock()
	p, err := startProvider(name, s.reg, s.rec, providerOptions{
		service:    s.cfg.service,
		shedEvery:  s.cfg.shedEvery,
		retryAfter: s.cfg.retryAfter,
		log:        s.log,
	}, avoid)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.providers = append(s.providers, p)
	s.serving = append(s.serving, p)
	s.ports[p.port] = true
	s.mu.Unlock()
	return p, nil
}

// startConsumer builds the consumer: a naming client, the nacos adapter,
// a subscriber.Manager whose subscription feeds a cluster.RegistryDirectory
// of HTTP invokers, and a failback invoker over that directory. It returns
// once the directory lists the first providers.
func (s *scenario) startConsumer(ctx context.Context) error {
	cfg := s.cfg
	var err error
	if s.client, err = s.reg.newClient("consumer"); err != nil {
		return err
	}
	if s.nreg, err = nacos.New(s.client, nacos.WithLogger(s.log)); err != nil {
		return err
	}
	s.mgr, err = subscriber.New(s.nreg,
		subscriber.WithLogger(s.log),
		subscriber.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second}))
	if err != nil {
		return err
	}
	s.dir, err = cluster.NewRegistryDirectory(
		dialHTTP(invokerOptions{timeout: cfg.callTimeout, maxConns: cfg.senders + cfg.workers}),
		cluster.WithLogger(s.log))
	if err != nil {
		return err
	}
	// The listener: show each push, then hand it to the directory.
	listener := func(ins []subscriber.Instance) {
		s.out.event("registry push: %s", describeInstances(ins))
		s.dir.Update(ins)
	}
	sub, err := s.mgr.Subscribe(context.WithoutCancel(ctx), subscriber.Key{Service: cfg.service}, listener)
	if err != nil {
		return err
	}

	s.fb, err = failback.New(s.dir,
		failback.WithMaxTasks(cfg.maxTasks),
		failback.WithConcurrency(cfg.workers),
		failback.WithPolicy(rebound.Policy{Initial: cfg.backoff, Max: cfg.backoffMax}, rebound.WithMaxAttempts(cfg.retries+1), rebound.WithObserver(s.led.hooks())),
		failback.WithAttemptTimeout(cfg.callTimeout),
		failback.WithLoadBalance(cluster.RoundRobin()),
		failback.WithLogger(s.log))
	if err != nil {
		return err
	}

	// Wait, bounded, until the directory lists the first providers.
	wctx, cancel := context.WithTimeout(ctx, cfg.startup)
	defer cancel()
	if err := s.dir.WaitReady(wctx); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		st := sub.Status()
		return fmt.Errorf("consumer: the directory listed no provider within %v (subscription %s, last error %v): %w",
			cfg.startup, st.State, st.LastErr, err)
	}
	l, _ := s.dir.List(ctx, nil)
	s.out.event("consumer ready: subscription %s, directory lists %d providers", sub.Status().State, len(l))
	return nil
}

func describeInstances(ins []subscriber.Instance) string {
	if len(ins) == 0 {
		return "0 instances (the directory keeps its last non-empty list; calls to it fail and are retried)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d instance", len(ins))
	if len(ins) > 1 {
		b.WriteByte('s')
	}
	for i, in := range ins {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s %s:%d", sep, in.Metadata["provider"], in.IP, in.Port)
	}
	return b.String()
}

// send sends cfg.n notifications at a steady rate from cfg.senders
// goroutines, and closes crash once the crash point is reached. It returns
// how many it handed to the senders, after they have all returned.
func (s *scenario) send(ctx context.Context, crash chan struct{}) int {
	cfg := s.cfg
	ids := make(chan int)
	var wg sync.WaitGroup
	for range cfg.senders {
		wg.Go(func() {
			for id := range ids {
				s.sendOne(ctx, id)
			}
		})
	}
	crashAfter := s.crashAfter()
	interval := time.Duration(float64(time.Second) / cfg.rate)
	tick := time.NewTicker(max(interval, time.Microsecond))
	defer tick.Stop()
	s.out.event("sending %d notifications, one every %v; %s", cfg.n, interval, crashPoint(crashAfter))
	sent := 0
	if crashAfter == 0 {
		close(crash)
	}
loop:
	for id := 1; id <= cfg.n; id++ {
		if id > 1 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				break loop
			}
		}
		select {
		case ids <- id:
			sent++
		case <-ctx.Done():
			break loop
		}
		if sent == crashAfter {
			close(crash)
		}
	}
	close(ids)
	wg.Wait()
	return sent
}

// crashAfter is the number of notifications sent before the crash, -1 for
// none.
func (s *scenario) crashAfter() int {
	if !s.cfg.crash {
		return -1
	}
	return int(math.Round(s.cfg.killAt * float64(s.cfg.n)))
}

func crashPoint(after int) string {
	if after < 0 {
		return "no crash (-crash=false)"
	}
	return "crash after " + strconv.Itoa(after) + " sent"
}

// sendOne sends notification id through the failback invoker. Every
// bad-every-th one has no recipient, which the providers reject with 400:
// a call that must not be retried.
func (s *scenario) sendOne(ctx context.Context, id int) {
	n := Notification{ID: id, To: fmt.Sprintf("user-%d", id%50), Message: "order " + strconv.Itoa(id) + " shipped"}
	if s.cfg.badEvery > 0 && id%s.cfg.badEvery == 0 {
		n.To = ""
	}
	inv := &cluster.Invocation{
		Method:      "Notify",
		Args:        []any{n},
		Attachments: map[string]string{"Notification-Id": strconv.Itoa(id)},
	}
	s.led.markSent(id)
	_, err := s.fb.Invoke(ctx, inv)
	s.led.invoked(id, err)
}

// chaos crashes every serving provider once crash is closed, then, -down
// later, starts as many replacements on new ports and waits until the
// consumer lists them. It returns at once if noCrash is closed, and as soon
// as ctx is done. It closes done when it returns.
func (s *scenario) chaos(ctx context.Context, crash, noCrash <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	select {
	case <-crash:
	case <-noCrash:
		return
	case <-ctx.Done():
		return
	}
	sent := s.crashAfter()
	s.mu.Lock()
	victims := s.serving
	s.serving = nil
	s.mu.Unlock()
	names := make([]string, len(victims))
	for i, p := range victims {
		names[i] = p.name + " " + p.addr
	}
	s.out.event("CRASH after %d sent: killing %s (closing their HTTP servers and registry clients)", sent, strings.Join(names, ", "))
	var wg sync.WaitGroup
	errs := make([]error, len(victims))
	for i, p := range victims {
		wg.Go(func() { errs[i] = p.kill() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.out.event("crash: %v", err)
	}

	t := time.NewTimer(s.cfg.down)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return
	}
	s.mu.Lock()
	next := len(s.providers) + 1
	s.mu.Unlock()
	var started []*provider
	for i, old := range victims {
		p, err := s.startProvider(fmt.Sprintf("p%d", next+i))
		if err != nil {
			s.out.event("restart failed: %v", err)
			continue
		}
		started = append(started, p)
		s.out.event("restart: provider %s serving on %s (new port; replaces %s on %s), registered", p.name, p.addr, old.name, old.addr)
	}
	if len(started) > 0 {
		s.waitListed(ctx, started)
	}
}

// waitListed waits, bounded by cfg.startup, until the consumer's directory
// lists every provider in ps.
func (s *scenario) waitListed(ctx context.Context, ps []*provider) {
	listed := func() bool {
		l, err := s.dir.List(ctx, nil)
		if err != nil {
			return false
		}
		for _, p := range ps {
			if !slices.ContainsFunc(l, func(inv cluster.Invoker) bool { return inv.Target() == p.addr }) {
				return false
			}
		}
		return true
	}
	deadline := time.NewTimer(s.cfg.startup)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !listed() {
		select {
		case <-tick.C:
		case <-deadline.C:
			s.out.event("consumer: the directory did not list the replacements within %v", s.cfg.startup)
			return
		case <-ctx.Done():
			return
		}
	}
	s.out.event("consumer: the directory lists the %d replacements", len(ps))
}

// startProgress prints a progress line every cfg.progress until the
// returned function is called.
func (s *scenario) startProgress() (stop func()) {
	if s.cfg.progress <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.progress)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.printProgress()
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (s *scenario) printProgress() {
	p := s.led.progress()
	st := s.fb.Stats()
	listed := 0
	if l, err := s.dir.List(context.Background(), nil); err == nil {
		listed = len(l)
	}
	s.out.event("sent %d/%d | delivered %d first attempt + %d after retry | dropped %d | awaiting retry %d (queued %d, in flight %d) | directory lists %d",
		p.sent, s.cfg.n, p.first, p.retried, p.dropped, p.waiting, st.Queued, st.InFlight, listed)
}

// drain lets failback finish its pending retries, up to cfg.drain
// (failback.Invoker.Shutdown); what is still pending then is reported
// dropped with ErrClosed, and failback is stopped.
func (s *scenario) drain(ctx context.Context) {
	st := s.fb.Stats()
	if n := st.Queued + st.InFlight; n > 0 {
		s.out.event("draining: %d notifications awaiting retry (up to %v)", n, s.cfg.drain)
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.drain)
	defer cancel()
	start, before := time.Now(), st.Dropped[failback.ErrClosed]
	err := s.fb.Shutdown(dctx)
	switch dropped := s.fb.Stats().Dropped[failback.ErrClosed] - before; {
	case err == nil:
		s.out.event("drained in %.2fs", time.Since(start).Seconds())
	case ctx.Err() != nil:
		s.out.event("interrupted: %d notifications awaiting retry reported dropped (closed)", dropped)
	default:
		s.out.event("drain timed out: %d notifications still awaiting retry reported dropped (closed)", dropped)
	}
}

// shutdown stops everything that was started, in the documented order
// (README, "Teardown"): failback first (it calls the directory's
// invokers), then the subscription manager (it calls the directory's
// Update), the consumer's registry adapter and client, the directory and
// its invokers, the providers and the registry. Each step that can block
// is bounded by cfg.shutdown. With verbose it prints each step. It runs
// once; later calls return nil.
func (s *scenario) shutdown(verbose bool) error {
	s.mu.Lock()
	reg, serving := s.reg, s.serving
	s.reg, s.serving = nil, nil
	s.mu.Unlock()
	if reg == nil {
		return nil
	}
	step := func(name string, stop func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.shutdown)
		defer cancel()
		start := time.Now()
		err := stop(ctx)
		if verbose && name != "" {
			s.out.event("shutdown: %s in %v", name, time.Since(start).Round(time.Microsecond))
		}
		return err
	}
	var errs []error
	if s.fb != nil { // already drained by drain on the normal path: Close only waits
		errs = append(errs, step("failback closed", func(context.Context) error { return s.fb.Close() }))
	}
	if s.mgr != nil {
		errs = append(errs, step("subscription manager closed", s.mgr.Shutdown))
	}
	if s.nreg != nil {
		errs = append(errs, s.nreg.Close())
	}
	if s.client != nil {
		s.client.CloseClient()
	}
	if s.dir != nil {
		errs = append(errs, s.dir.Close())
	}
	perr := make([]error, len(serving))
	var wg sync.WaitGroup
	for i, p := range serving {
		wg.Go(func() { perr[i] = step("", p.stop) })
	}
	wg.Wait()
	errs = append(errs, perr...)
	if verbose {
		s.out.event("shutdown: consumer client closed, directory closed, %d providers deregistered and stopped", len(serving))
	}
	clients, opened, embedded := reg.reconnects()
	errs = append(errs, reg.close())
	if verbose {
		s.out.event("shutdown: registry stopped")
		if embedded {
			note := "no client reconnected"
			if opened != int64(clients) {
				note = "some client reconnected"
			}
			s.out.printf("registry: %d naming clients, %d connections opened (%s)\n", clients, opened, note)
		}
	}
	return errors.Join(errs...)
}

// printProviders prints what each provider did.
func (s *scenario) printProviders() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.printf("\nproviders\n")
	for _, p := range s.providers {
		s.out.printf("  %-4s %-21s %-8s accepted %4d   shed with 503 %3d   rejected with 400 %3d\n",
			p.name, p.addr, p.state, p.accepted.Load(), p.shed.Load(), p.rejected.Load())
	}
}
