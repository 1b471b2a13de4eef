package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// dialError reports an instance that could not be dialled: it is left out
// (or keeps its previous invoker if it only changed) until pushed again.
type dialError struct {
	Instance subscriber.Instance
	Err      error
}

func (e *dialError) Error() string {
	return fmt.Sprintf("cluster: dialling instance %s (%s): %v", instanceKey(e.Instance), hostPort(e.Instance), e.Err)
}

func (e *dialError) Unwrap() error { return e.Err }

type dirConfig struct {
	logger       *zap.Logger
	filter       func(subscriber.Instance) bool
	custom       bool               // filter was set by WithFilter
	errorHandler func(error)        // the tests' view of what is logged (export_test.go)
	view         *subscriber.View   // WithView (view.go)
	views        []*subscriber.View // every View given with WithView, closed if the constructor fails
	errs         []error
}

// WithFilter sets which instances a RegistryDirectory may call. Default:
// healthy, enabled ones. A nil keep admits every instance.
func WithFilter(keep func(subscriber.Instance) bool) Option {
	return dirOption("WithFilter", func(c *dirConfig) {
		if keep == nil {
			keep = func(subscriber.Instance) bool { return true }
		}
		c.filter, c.custom = keep, true
	})
}

// RegistryDirectory is a Directory fed by a registry. Pass Update to
// subscriber.Manager.Subscribe, or give it a View with WithView.
//
//	dir, err := cluster.NewRegistryDirectory(dial)
//	sub, err := manager.Subscribe(ctx, key, dir.Update)
//	err = dir.WaitReady(ctx) // the first invokers are listed
//
// An update reuses the invokers of unchanged instances and dials the
// others. It closes the invokers it drops. A push that would leave no
// invoker is not applied. docs/cluster.md has the rules. Its methods are
// safe for concurrent use.
type RegistryDirectory struct {
	dial func(subscriber.Instance) (Invoker, error)
	cfg  dirConfig

	snap atomic.Pointer[dirSnapshot] // what List reads

	mu         sync.Mutex
	entries    map[string]*dirEntry // current list by key; replaced, never mutated
	version    uint64               // incremented by every applied update
	seq        uint64               // updates started
	appliedSeq uint64               // seq of the last applied update
	closed     bool
	ready      chan struct{} // closed once the list first has an invoker, or by Close
	readyDone  bool

	follow *follower // WithView's reader, nil without (view.go)
}

type dirSnapshot struct {
	invokers []Invoker
	closed   bool
	why      error // List's error for an empty list whose push was all filtered out
}

type dirEntry struct {
	inst    subscriber.Instance
	invoker Invoker
}

// NewRegistryDirectory returns an empty directory that dials instances into
// invokers. dial runs once per new or changed instance, with no lock held.
// A failed dial leaves its instance out and is logged. A nil dial or a bad
// option is a *rebound.ArgumentError.
func NewRegistryDirectory(dial func(subscriber.Instance) (Invoker, error), opts ...Option) (*RegistryDirectory, error) {
	d := &RegistryDirectory{
		dial: dial,
		cfg: dirConfig{
			logger: zap.NewNop(),
			filter: func(in subscriber.Instance) bool { return in.Healthy && in.Enabled },
		},
		entries: map[string]*dirEntry{},
		ready:   make(chan struct{}),
	}
	var errs []error
	if dial == nil {
		errs = append(errs, &rebound.ArgumentError{Func: "cluster.NewRegistryDirectory", Arg: "dial",
			Reason: "must not be nil: the function that turns instances into invokers"})
	}
	errs = append(errs, applyOptions(&config{dir: &d.cfg}, opts)...)
	if errs = append(errs, d.cfg.errs...); len(errs) > 0 {
		for _, v := range d.cfg.views {
			_ = v.Close() // the directory owned it from the call on
		}
		return nil, errors.Join(errs...)
	}
	d.snap.Store(&dirSnapshot{})
	d.startFollow()
	return d, nil
}

// List returns the current invokers; the caller must not modify them.
// Empty, its error wraps ErrNoInvokers, with why when the filter left out
// every instance. Closed, its error matches rebound.ErrClosed.
func (d *RegistryDirectory) List(_ context.Context, _ *Invocation) ([]Invoker, error) {
	s := d.snap.Load()
	if s.closed {
		return nil, errClosed
	}
	if len(s.invokers) == 0 {
		if s.why != nil {
			return nil, s.why
		}
		return nil, ErrNoInvokers
	}
	return s.invokers, nil
}

// WaitReady waits until the directory first lists an invoker. It returns
// ctx.Err() if ctx ends first. Closed before, it returns an error matching
// rebound.ErrClosed. A nil ctx is an error.
func (d *RegistryDirectory) WaitReady(ctx context.Context) error {
	if ctx == nil {
		return &rebound.ArgumentError{Func: "cluster.RegistryDirectory.WaitReady", Arg: "ctx", Reason: "must not be nil"}
	}
	select {
	case <-d.ready:
	default:
		select {
		case <-d.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed && !d.readyDone {
		return errClosed
	}
	return nil
}

// markReadyLocked closes ready the first time; listed says whether the
// directory has listed an invoker (false: closed first).
func (d *RegistryDirectory) markReadyLocked(listed bool) {
	select {
	case <-d.ready:
		return
	default:
	}
	d.readyDone = listed
	close(d.ready)
}

// Update replaces the list with instances. It is a subscription's listener and
// does nothing after Close.
func (d *RegistryDirectory) Update(instances []subscriber.Instance) {
	wanted, keys := d.admit(instances) // outside any lock: the filter is user code
	why := d.filteredOut(instances, len(wanted))
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.seq++
	mySeq := d.seq
	d.mu.Unlock()
	for {
		d.mu.Lock()
		if d.closed || mySeq < d.appliedSeq {
			d.mu.Unlock()
			return
		}
		base, baseVersion := d.entries, d.version
		d.mu.Unlock()
		r := d.dialAll(base, wanted, keys) // no lock held
		if d.apply(r, base, baseVersion, mySeq, why, len(instances), len(wanted)) {
			return
		}
	}
}

// admit filters instances and drops duplicates, copying what it keeps.
func (d *RegistryDirectory) admit(instances []subscriber.Instance) (wanted []subscriber.Instance, keys []string) {
	wanted = make([]subscriber.Instance, 0, len(instances))
	keys = make([]string, 0, len(instances))
	seen := make(map[string]struct{}, len(instances))
	for _, in := range instances {
		if !d.cfg.filter(in) {
			continue
		}
		k := instanceKey(in)
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		in.Metadata = maps.Clone(in.Metadata)
		in.Weight = normalWeight(in.Weight)
		wanted = append(wanted, in)
		keys = append(keys, k)
	}
	return wanted, keys
}

// dialResult is what one pass of Update dialled.
type dialResult struct {
	next    map[string]*dirEntry
	list    []Invoker
	dialled []*dirEntry
	reports []error
}

// dialAll builds the next list from base, dialling new and changed
// instances. It must be called with no lock held.
func (d *RegistryDirectory) dialAll(base map[string]*dirEntry, wanted []subscriber.Instance, keys []string) dialResult {
	r := dialResult{next: make(map[string]*dirEntry, len(wanted)), list: make([]Invoker, 0, len(wanted))}
	for i, in := range wanted {
		k := keys[i]
		old := base[k]
		if old != nil && instanceEqual(old.inst, in) {
			r.next[k] = old
			r.list = append(r.list, old.invoker)
			continue
		}
		iv, err := d.safeDial(in)
		if err == nil && iv == nil {
			err = errors.New("dial returned a nil Invoker and no error")
		}
		if err != nil {
			r.reports = append(r.reports, &dialError{Instance: in, Err: err})
			if old != nil { // changed but not dialable: keep what worked
				r.next[k] = old
				r.list = append(r.list, old.invoker)
			}
			continue
		}
		e := &dirEntry{inst: in, invoker: iv}
		r.dialled = append(r.dialled, e)
		r.next[k] = e
		r.list = append(r.list, iv)
	}
	return r
}

// apply puts r in place unless the directory changed while it was dialled.
// It reports false when Update must dial again from the newer list.
func (d *RegistryDirectory) apply(r dialResult, base map[string]*dirEntry, baseVersion, mySeq uint64, why error, pushed, admitted int) bool {
	d.mu.Lock()
	switch {
	case d.closed || mySeq < d.appliedSeq:
		// Closed meanwhile, or a later update won: discard our work.
		d.mu.Unlock()
		d.report(r.reports)
		d.closeEntries(r.dialled, "discarded")
		return true
	case d.version != baseVersion:
		// An earlier update was applied while we dialled: start over
		// from the list it left, so that nothing it closed is reused.
		d.mu.Unlock()
		d.closeEntries(r.dialled, "discarded")
		return false
	}
	if len(r.list) == 0 && len(base) > 0 {
		d.appliedSeq = mySeq // a later update still wins
		d.mu.Unlock()
		d.report(r.reports)
		d.cfg.logger.Warn("cluster: update would leave no invoker; keeping the last known good list",
			zap.Int("pushed", pushed), zap.Int("admitted", admitted), zap.Int("kept", len(base)), zap.NamedError("why", why))
		return true
	}
	var removed []*dirEntry
	for k, e := range base {
		if r.next[k] != e {
			removed = append(removed, e)
		}
	}
	d.entries = r.next
	d.version++
	d.appliedSeq = mySeq
	d.snap.Store(&dirSnapshot{invokers: r.list, why: why})
	if len(r.list) > 0 {
		d.markReadyLocked(true)
	}
	d.mu.Unlock()
	d.report(r.reports)
	if why != nil {
		d.cfg.logger.Warn("cluster: every instance is filtered out", zap.NamedError("why", why))
	}
	d.cfg.logger.Debug("cluster: directory updated",
		zap.Int("invokers", len(r.list)), zap.Int("dialled", len(r.dialled)), zap.Int("removed", len(removed)))
	d.closeEntries(removed, "removed")
	return true
}

// filteredOut returns why List finds no invoker after a push of instances
// of which wanted passed the filter; nil if some did or none was pushed.
// With WithFilter the reasons are the caller's: it does not guess them.
func (d *RegistryDirectory) filteredOut(instances []subscriber.Instance, wanted int) error {
	switch {
	case len(instances) == 0 || wanted > 0:
		return nil
	case d.cfg.custom:
		return fmt.Errorf("%w: the registry lists %d instance(s), all refused by the filter (WithFilter)", ErrNoInvokers, len(instances))
	}
	return fmt.Errorf("%w: the registry lists %s (the filter keeps healthy, enabled instances by default)",
		ErrNoInvokers, subscriber.FilteredOut(subscriber.Key{}, instances))
}

// Close empties the directory and closes its io.Closer invokers, returning
// their errors. It is idempotent.
func (d *RegistryDirectory) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	all := make([]*dirEntry, 0, len(d.entries))
	for _, e := range d.entries {
		all = append(all, e)
	}
	d.entries = nil
	d.version++
	d.snap.Store(&dirSnapshot{closed: true})
	d.markReadyLocked(false)
	d.mu.Unlock()
	d.stopFollow()
	return errors.Join(d.closeEntries(all, "directory closed")...)
}

// safeDial calls the dial function, turning a panic into a *PanicError so that
// the invokers already dialled by the same update are not leaked.
func (d *RegistryDirectory) safeDial(in subscriber.Instance) (iv Invoker, err error) {
	defer func() {
		if r := recover(); r != nil {
			iv, err = nil, newPanicError("cluster.NewRegistryDirectory dial", r)
		}
	}()
	return d.dial(in)
}

// safeClose closes c, turning a panic into a *PanicError.
func safeClose(c io.Closer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError("io.Closer.Close", r)
		}
	}()
	return c.Close()
}

// closeEntries closes the invokers that implement io.Closer and reports
// the failures; it must be called with no lock held.
func (d *RegistryDirectory) closeEntries(es []*dirEntry, why string) []error {
	var errs []error
	for _, e := range es {
		c, ok := e.invoker.(io.Closer)
		if !ok {
			continue
		}
		if err := safeClose(c); err != nil {
			errs = append(errs, fmt.Errorf("cluster: closing invoker %s (%s): %w", e.invoker.Target(), why, err))
		}
	}
	d.report(errs)
	return errs
}

func (d *RegistryDirectory) report(errs []error) {
	for _, err := range errs {
		var de *dialError
		if errors.As(err, &de) {
			d.cfg.logger.Warn("cluster: dial failed; instance left out until it is pushed again",
				zap.String("instance", instanceKey(de.Instance)), zap.String("addr", hostPort(de.Instance)), zap.Error(de.Err))
		} else {
			d.cfg.logger.Warn("cluster: closing invoker failed", zap.Error(err))
		}
		if d.cfg.errorHandler != nil {
			d.cfg.errorHandler(err)
		}
	}
}

func instanceKey(in subscriber.Instance) string {
	if in.ID != "" {
		return in.ID
	}
	return hostPort(in)
}

func hostPort(in subscriber.Instance) string {
	return net.JoinHostPort(in.IP, strconv.FormatUint(in.Port, 10))
}

// normalWeight maps a NaN or negative weight to 0 and +Inf to
// math.MaxFloat64, so that weights compare equal to themselves.
func normalWeight(w float64) float64 {
	switch {
	case math.IsNaN(w) || w < 0:
		return 0
	case math.IsInf(w, 1):
		return math.MaxFloat64
	}
	return w
}

func instanceEqual(a, b subscriber.Instance) bool {
	return a.ID == b.ID && a.IP == b.IP && a.Port == b.Port && a.Weight == b.Weight &&
		a.Healthy == b.Healthy && a.Enabled == b.Enabled && a.Ephemeral == b.Ephemeral &&
		a.Cluster == b.Cluster && maps.Equal(a.Metadata, b.Metadata)
}
