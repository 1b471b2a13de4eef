package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/examples/internal/observe"
	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
)

// live is the status page's source (-serve): the subscriptions of the
// rebound run's consumers while their Managers run, then the last Status
// each had before it was closed, so that -keep still shows the run. The
// same services are subscribed by every consumer: a row's key carries its
// consumer in the group field when the key has none ("c07/svc-12"), else
// in the namespace field.
type live struct {
	mu       sync.Mutex
	running  map[*reboundConsumer]string // -> consumer label
	last     []subscriber.Status         // of closed consumers
	sessions int

	meterProvider metric.MeterProvider // for the consumers' options
}

func newLive() *live { return &live{running: map[*reboundConsumer]string{}} }

// add shows c's subscriptions from now on. A nil *live does nothing.
func (l *live) add(c *reboundConsumer) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.running) == 0 && l.sessions > 0 && len(l.last) > 0 {
		l.last = nil // a new run: forget the previous one
	}
	l.sessions++
	l.running[c] = fmt.Sprintf("c%02d", len(l.running)+1)
	c.live = l
}

// options are the consumers' extra Manager options: the metrics (none
// without -serve).
func (l *live) options() []subscriber.Option {
	if l == nil || l.meterProvider == nil {
		return nil
	}
	return []subscriber.Option{subscriber.WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(l.meterProvider))}
}

// closing keeps c's last Status; c is about to be closed.
func (l *live) closing(c *reboundConsumer) {
	if l == nil {
		return
	}
	st := c.m.Status()
	l.mu.Lock()
	defer l.mu.Unlock()
	label, ok := l.running[c]
	if !ok {
		return
	}
	delete(l.running, c)
	l.last = append(l.last, labelled(label, st)...)
}

// Status is what statusz.WithSubscriptions reads.
func (l *live) Status() []subscriber.Status {
	l.mu.Lock()
	running := make(map[*reboundConsumer]string, len(l.running))
	for c, label := range l.running {
		running[c] = label
	}
	out := append([]subscriber.Status(nil), l.last...)
	l.mu.Unlock()
	for c, label := range running {
		out = append(out, labelled(label, c.m.Status())...)
	}
	return out
}

// Connected is the method statusz.WithSubscriptions looks for: the registry is
// shown disconnected while any running consumer's client reports so.
func (l *live) Connected() (connected, reported bool) {
	l.mu.Lock()
	running := make([]*reboundConsumer, 0, len(l.running))
	for c := range l.running {
		running = append(running, c)
	}
	l.mu.Unlock()
	for _, c := range running {
		up, ok := c.m.Connected()
		switch {
		case ok && !up:
			return false, true
		case ok:
			connected, reported = true, true
		}
	}
	return connected, reported
}

func labelled(label string, st []subscriber.Status) []subscriber.Status {
	for i := range st {
		if k := &st[i].Key; k.Namespace == "" && k.Group == "" {
			k.Group = label // shown as "c07/svc-12"
		} else {
			k.Namespace = label
		}
	}
	return st
}

// serve starts the status page and the Prometheus endpoint on addr and
// prints their URLs to w. The returned stop waits, with -keep, for ctx
// (an interrupt) first.
func serve(ctx context.Context, cfg config, w io.Writer) (stop func(), err error) {
	o, err := observe.New()
	if err != nil {
		return nil, err
	}
	cfg.live.meterProvider = o.MeterProvider()
	if err := o.Serve(cfg.serve, w, statusz.WithSubscriptions("rebound consumers", cfg.live)); err != nil {
		return nil, err
	}
	return func() {
		if cfg.keep {
			status, _ := o.URLs()
			fmt.Fprintf(w, "-keep: still serving %s; interrupt (Ctrl-C) to stop\n", status)
			<-ctx.Done()
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = o.Shutdown(sctx)
	}, nil
}
