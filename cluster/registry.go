package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound/subscriber"
)

// DialFunc turns a registry instance into an Invoker, for example by opening
// a client connection to instance.IP:instance.Port. It is called by
// RegistryDirectory.Update, from the goroutine calling Update, with no lock
// held, once per new or changed instance. It should not block for long: the
// registry's next push waits for it. A returned Invoker that implements
// io.Closer is closed when its instance disappears or changes, or when the
// directory is closed.
type DialFunc func(subscriber.Instance) (Invoker, error)

// DialError reports an instance that could not be dialled. The instance is
// left out of the list (or, if it was already listed and only changed, its
// previous invoker is kept) until a later push lists it again.
type DialError struct {
	Instance subscriber.Instance
	Err      error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("cluster: dialling instance %s (%s): %v", instanceKey(e.Instance), hostPort(e.Instance), e.Err)
}

// Unwrap returns the dial function's error.
func (e *DialError) Unwrap() error { return e.Err }

// A DirectoryOption configures NewRegistryDirectory.
type DirectoryOption interface {
	apply(*dirConfig)
}

type dirOptionFunc func(*dirConfig)

func (f dirOptionFunc) apply(c *dirConfig) { f(c) }

type dirConfig struct {
	logger       *zap.Logger
	filter       func(subscriber.Instance) bool
	keepOnEmpty  bool
	errorHandler func(error)
}

// WithLogger sets the logger for dial failures (Warn), kept-on-empty pushes
// (Warn), close failures (Warn) and list changes (Debug). Default: no
// logging. A nil l is ignored.
func WithLogger(l *zap.Logger) DirectoryOption {
	return dirOptionFunc(func(c *dirConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithFilter sets which instances may receive calls. Default: instances
// that are both Healthy and Enabled. A nil keep admits every instance.
func WithFilter(keep func(subscriber.Instance) bool) DirectoryOption {
	return dirOptionFunc(func(c *dirConfig) {
		if keep == nil {
			keep = func(subscriber.Instance) bool { return true }
		}
		c.filter = keep
	})
}

// WithKeepOnEmpty sets what an update that would leave the directory with
// no invoker does: an empty push, a push whose instances are all filtered
// out, or one whose every new instance fails to dial. true (the default)
// keeps the current list, the last known good one, and logs a warning:
// registries do push empty lists by mistake (a registry restart, a network
// partition), and a list of providers that may be down is better than none;
// calls to a provider that is really gone fail with a network error, which
// failback retries. false applies the update: every invoker is closed and
// List returns ErrNoInvokers until instances come back.
func WithKeepOnEmpty(keep bool) DirectoryOption {
	return dirOptionFunc(func(c *dirConfig) { c.keepOnEmpty = keep })
}

// WithErrorHandler sets a function that receives every error of the
// directory's own work: each *DialError and each error from closing an
// invoker. It is called from the goroutine calling Update or Close, with no
// lock held, and must be safe for concurrent use if Update and Close can
// run concurrently. Default: none (errors are only logged).
func WithErrorHandler(fn func(error)) DirectoryOption {
	return dirOptionFunc(func(c *dirConfig) { c.errorHandler = fn })
}

// RegistryDirectory is a Directory fed by a registry subscription: pass its
// Update method as the subscriber.Listener.
//
//	dir, err := cluster.NewRegistryDirectory(dial)
//	sub, err := manager.Subscribe(ctx, key, dir.Update)
//
// Each instance is identified by its ID, or by IP:Port when the ID is empty;
// duplicates in one push keep the first. An update:
//
//   - reuses the invoker of an instance that is unchanged (every field equal,
//     Metadata compared by content);
//   - dials new instances and changed instances (any field changed); an
//     instance whose dial fails is left out, or keeps its previous invoker
//     if it only changed, and the *DialError is reported;
//   - closes, after the new list is in place and outside the directory's
//     lock, every invoker that is no longer listed, if it implements
//     io.Closer;
//   - keeps the current list (last known good) instead of applying an update
//     that would leave no invoker, unless WithKeepOnEmpty(false).
//
// The zero value is not usable: create one with NewRegistryDirectory. All
// methods are safe for concurrent use. List does not allocate and returns
// the current list (in push order), which the caller must not modify; the
// list is replaced, never changed in place, by an update. Concurrent Updates
// are resolved in call order: an update that finishes dialling after a
// later one was applied is discarded (and what it dialled is closed).
type RegistryDirectory struct {
	dial DialFunc
	cfg  dirConfig

	snap atomic.Pointer[dirSnapshot] // what List reads

	mu         sync.Mutex
	entries    map[string]*dirEntry // current list by key; replaced, never mutated
	version    uint64               // incremented by every applied update
	seq        uint64               // updates started
	appliedSeq uint64               // seq of the last applied update
	closed     bool
}

type dirSnapshot struct {
	invokers []Invoker
	closed   bool
}

type dirEntry struct {
	inst    subscriber.Instance
	invoker Invoker
}

// NewRegistryDirectory returns an empty directory that turns instances into
// invokers with dial. Until the first update with instances, List returns
// ErrNoInvokers. A nil dial is an error wrapping ErrInvalidArgument.
func NewRegistryDirectory(dial DialFunc, opts ...DirectoryOption) (*RegistryDirectory, error) {
	if dial == nil {
		return nil, fmt.Errorf("%w: NewRegistryDirectory: dial is nil: a DialFunc is required to turn instances into invokers", ErrInvalidArgument)
	}
	d := &RegistryDirectory{
		dial: dial,
		cfg: dirConfig{
			logger:      zap.NewNop(),
			filter:      func(in subscriber.Instance) bool { return in.Healthy && in.Enabled },
			keepOnEmpty: true,
		},
		entries: map[string]*dirEntry{},
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&d.cfg)
		}
	}
	d.snap.Store(&dirSnapshot{})
	return d, nil
}

// List returns the current invokers. It returns ErrNoInvokers while the list
// is empty and ErrClosed after Close. ctx and inv are not used.
func (d *RegistryDirectory) List(_ context.Context, _ *Invocation) ([]Invoker, error) {
	s := d.snap.Load()
	if s.closed {
		return nil, ErrClosed
	}
	if len(s.invokers) == 0 {
		return nil, ErrNoInvokers
	}
	return s.invokers, nil
}

// Update replaces the directory's list with the given instances (see
// RegistryDirectory for the rules). It has the signature of a
// subscriber.Listener. It does not keep or modify instances (it copies what
// it keeps, Metadata included). After Close it does nothing.
func (d *RegistryDirectory) Update(instances []subscriber.Instance) {
	// Filter and dedupe outside any lock: the filter is user code.
	wanted := make([]subscriber.Instance, 0, len(instances))
	keys := make([]string, 0, len(instances))
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
		wanted = append(wanted, in)
		keys = append(keys, k)
	}

	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.seq++
	mySeq := d.seq
	d.mu.Unlock()

	var reports []error
	for {
		d.mu.Lock()
		if d.closed || mySeq < d.appliedSeq {
			d.mu.Unlock()
			return
		}
		base, baseVersion := d.entries, d.version
		d.mu.Unlock()

		// Dial new and changed instances with no lock held.
		next := make(map[string]*dirEntry, len(wanted))
		list := make([]Invoker, 0, len(wanted))
		var dialled []*dirEntry
		reports = reports[:0]
		for i, in := range wanted {
			k := keys[i]
			old := base[k]
			if old != nil && instanceEqual(old.inst, in) {
				next[k] = old
				list = append(list, old.invoker)
				continue
			}
			iv, err := d.dial(in)
			if err == nil && iv == nil {
				err = errors.New("dial returned a nil Invoker and no error")
			}
			if err != nil {
				reports = append(reports, &DialError{Instance: in, Err: err})
				if old != nil { // changed but not dialable: keep what worked
					next[k] = old
					list = append(list, old.invoker)
				}
				continue
			}
			e := &dirEntry{inst: in, invoker: iv}
			dialled = append(dialled, e)
			next[k] = e
			list = append(list, iv)
		}

		d.mu.Lock()
		switch {
		case d.closed || mySeq < d.appliedSeq:
			// Closed meanwhile, or a later update won: discard our work.
			d.mu.Unlock()
			d.report(reports)
			d.closeEntries(dialled, "discarded")
			return
		case d.version != baseVersion:
			// An earlier update was applied while we dialled: start over
			// from the list it left, so that nothing it closed is reused.
			d.mu.Unlock()
			d.closeEntries(dialled, "discarded")
			continue
		}
		if len(list) == 0 && d.cfg.keepOnEmpty && len(base) > 0 {
			d.appliedSeq = mySeq // a later update still wins
			d.mu.Unlock()
			d.report(reports)
			d.cfg.logger.Warn("cluster: update would leave no invoker; keeping the last known good list",
				zap.Int("pushed", len(instances)), zap.Int("admitted", len(wanted)), zap.Int("kept", len(base)))
			return
		}
		var removed []*dirEntry
		for k, e := range base {
			if next[k] != e {
				removed = append(removed, e)
			}
		}
		d.entries = next
		d.version++
		d.appliedSeq = mySeq
		d.snap.Store(&dirSnapshot{invokers: list})
		d.mu.Unlock()

		d.report(reports)
		d.cfg.logger.Debug("cluster: directory updated",
			zap.Int("invokers", len(list)), zap.Int("dialled", len(dialled)), zap.Int("removed", len(removed)))
		d.closeEntries(removed, "removed")
		return
	}
}

// Close empties the directory, makes List return ErrClosed, and closes
// every invoker that implements io.Closer, with no lock held. It returns the
// close errors joined. It is idempotent: later calls return nil.
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
	d.mu.Unlock()
	return errors.Join(d.closeEntries(all, "directory closed")...)
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
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cluster: closing invoker %s (%s): %w", e.invoker.Target(), why, err))
		}
	}
	d.report(errs)
	return errs
}

func (d *RegistryDirectory) report(errs []error) {
	for _, err := range errs {
		var de *DialError
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

func instanceEqual(a, b subscriber.Instance) bool {
	return a.ID == b.ID && a.IP == b.IP && a.Port == b.Port && a.Weight == b.Weight &&
		a.Healthy == b.Healthy && a.Enabled == b.Enabled && a.Ephemeral == b.Ephemeral &&
		a.Cluster == b.Cluster && maps.Equal(a.Metadata, b.Metadata)
}
