package reboundgrpc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"google.golang.org/grpc"

	"github.com/rebound-go/rebound"
)

// DefaultDrainWait is how long Drain waits, by default, between the
// registry's confirmation that the instance is gone and the server's
// GracefulStop: the time consumers need to hear of it. It is the sum of
// what a Nacos 2.x server adds to a push (it batches a service's changes
// for nacos.naming.push.pushTaskDelay, 500 ms by default, and re-sends a
// failed push after pushTaskRetryDelay, 1 s), and a 500 ms margin for the
// consumers' resolvers and balancers to swap their pickers. An etcd watch
// delivers within milliseconds on a healthy cluster; measured figures for
// both registries are in docs/providers.md.
const DefaultDrainWait = 2 * time.Second

// Deregisterer is what Drain needs of a provider's registration: Shutdown
// removes the instance from the registry and returns once the registry no
// longer lists it (or with the reason it could not). Both adapters'
// Registrations (subscriber/etcd, subscriber/nacos) satisfy it.
type Deregisterer interface {
	Shutdown(ctx context.Context) error
}

// A DrainOption configures Drain.
type DrainOption interface {
	applyDrain(*drainOptions)
}

type drainOptionFunc func(*drainOptions)

func (f drainOptionFunc) applyDrain(o *drainOptions) { f(o) }

type drainOptions struct {
	wait time.Duration
	errs []error
}

// WithDrainWait sets how long Drain waits after the deregistration before
// it stops the server (default DefaultDrainWait). It must not be
// negative; 0 stops the server as soon as the registry confirmed the
// deregistration.
func WithDrainWait(d time.Duration) DrainOption {
	return drainOptionFunc(func(o *drainOptions) {
		if d < 0 {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "reboundgrpc.WithDrainWait", Arg: "d", Reason: fmt.Sprintf("must not be negative (got %v)", d)})
			return
		}
		o.wait = d
	})
}

// Drain stops srv without failing a call, in three steps, in this order:
//
//  1. reg.Shutdown(ctx): the instance leaves the registry (the adapters
//     retry the deregistration and return once the registry no longer
//     lists it);
//  2. it waits WithDrainWait (DefaultDrainWait), the time consumers need
//     to hear of it and stop picking this server;
//  3. srv.GracefulStop(): the server stops accepting, and returns when the
//     calls in flight have finished.
//
// Every step is bounded by ctx: when ctx ends, the remaining steps are
// cut short (srv.Stop() instead of waiting for GracefulStop), and Drain
// returns an error matching ctx.Err(). If the deregistration fails, the
// server is still stopped, after the wait, and the error is returned
// (consumers may then see calls fail: the registry may still list the
// instance until its connection or lease ends). srv is stopped in every
// case: Drain is for the end of a provider's life.
//
// It returns a *rebound.ArgumentError, and stops nothing, for a nil srv or
// reg or a bad option.
func Drain(ctx context.Context, srv *grpc.Server, reg Deregisterer, opts ...DrainOption) error {
	if srv == nil {
		return &rebound.ArgumentError{Func: "reboundgrpc.Drain", Arg: "srv", Reason: "must not be nil"}
	}
	if isNil(reg) {
		return &rebound.ArgumentError{Func: "reboundgrpc.Drain", Arg: "reg", Reason: "must not be nil"}
	}
	if ctx == nil {
		return &rebound.ArgumentError{Func: "reboundgrpc.Drain", Arg: "ctx", Reason: "must not be nil"}
	}
	o := drainOptions{wait: DefaultDrainWait}
	for _, opt := range opts {
		if opt != nil {
			opt.applyDrain(&o)
		}
	}
	if err := errors.Join(o.errs...); err != nil {
		return err
	}

	var errs []error
	if err := reg.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("reboundgrpc.Drain: deregistering: %w", err))
	}
	if err := sleepCtx(ctx, o.wait); err != nil {
		errs = append(errs, fmt.Errorf("reboundgrpc.Drain: waiting for consumers: %w", err))
	}
	if err := gracefulStop(ctx, srv); err != nil {
		errs = append(errs, fmt.Errorf("reboundgrpc.Drain: stopping the server: %w", err))
	}
	return errors.Join(errs...)
}

// gracefulStop runs srv.GracefulStop, and srv.Stop when ctx ends first
// (which makes GracefulStop return too).
func gracefulStop(ctx context.Context, srv *grpc.Server) error {
	if ctx.Err() != nil {
		srv.Stop()
		return ctx.Err()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.GracefulStop()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		srv.Stop()
		<-done
		return ctx.Err()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
