package cluster

import (
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/goid"
	"github.com/rebound-go/rebound/subscriber"
)

// WithView feeds a RegistryDirectory from v on a goroutine of its own. The
// directory owns v: Close, or a failed NewRegistryDirectory, closes it. A
// nil v or a second WithView is an error (docs/watch.md).
func WithView(v *subscriber.View) Option {
	return dirOption("WithView", func(c *dirConfig) {
		if v == nil {
			c.errs = append(c.errs, &rebound.ArgumentError{Func: "cluster.WithView", Arg: "v", Reason: "must not be nil"})
			return
		}
		c.views = append(c.views, v)
		if c.view != nil {
			c.errs = append(c.errs, &rebound.ArgumentError{Func: "cluster.WithView", Arg: "v", Reason: "a directory follows one View; WithView was given more than once"})
			return
		}
		c.view = v
	})
}

// follower is the goroutine of WithView.
type follower struct {
	v    *subscriber.View
	stop chan struct{}
	done chan struct{} // closed when run has returned and closed v
	id   atomic.Uint64 // run's goroutine
}

func (d *RegistryDirectory) startFollow() {
	if d.cfg.view == nil {
		return
	}
	f := &follower{v: d.cfg.view, stop: make(chan struct{}), done: make(chan struct{})}
	d.follow = f
	go f.run(d)
}

// stopFollow ends WithView's goroutine, once, and waits until it has
// closed the view; called from that goroutine (the dial function or error handler
// that closes the directory) it does not wait: the goroutine ends when its
// Update returns.
func (d *RegistryDirectory) stopFollow() {
	f := d.follow
	if f == nil {
		return
	}
	close(f.stop) // Close runs this once (it returns early when closed)
	if f.id.Load() == goid.ID() {
		return
	}
	<-f.done
}

func (f *follower) run(d *RegistryDirectory) {
	f.id.Store(goid.ID())
	defer close(f.done)
	defer func() { _ = f.v.Close() }()
	var seen uint64 // the version last read: the view is the only copy of the list
	warned := false
	for {
		select {
		case <-f.stop:
			return
		case <-f.v.Changed():
		}
		s := f.v.Snapshot()
		if s.Stopped != nil && !warned {
			warned = true
			d.cfg.logger.Warn("cluster: the directory's subscription stopped; keeping the last list", zap.Error(s.Stopped))
		}
		fresh := s.NewList(seen)
		seen = s.Version
		if fresh {
			f.update(d, s.List)
		}
	}
}

// update applies one list, recovering a panic of the user's code that
// Update runs (the WithFilter function, the tests' error handler),
// as the Manager does for a Listener: the directory keeps its last list
// and the goroutine goes on following the view.
func (f *follower) update(d *RegistryDirectory, list []subscriber.Instance) {
	defer func() {
		if r := recover(); r != nil {
			pe := newPanicError("cluster.RegistryDirectory.Update", r)
			d.cfg.logger.Error("cluster: recovered a panic while applying the view's list; keeping the last list",
				zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
		}
	}()
	d.Update(list)
}
