package rebound

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rebound-go/rebound/internal/telemetry"
)

// The attributes of an attempt's span (docs/tracing.md).
const (
	attrAttempt = "rebound.attempt"      // int: 1 for the first attempt
	attrWait    = "rebound.attempt.wait" // float64 s: since the previous attempt ended (0 for the first)
	attrClass   = "rebound.error.class"  // permanent | retry_after | transient
	attrVerdict = "rebound.verdict"      // success | retry | stop
	spanAttempt = "rebound.attempt"      // the span's name
)

// WithTracerProvider makes every attempt of Retry and Retrier.Do a span of tp,
// named by the tracer "github.com/rebound-go/rebound".
// A nil tp, the default, traces nothing and costs nothing (docs/tracing.md).
func WithTracerProvider(tp trace.TracerProvider) Option {
	if tp == nil {
		return nil
	}
	t := &tracer{tp.Tracer(telemetry.ScopeName)}
	return optionFunc(func(c *config) { c.tracer = t })
}

type tracer struct{ tr trace.Tracer }

// do runs the loop, each attempt in a span when the loop is traced.
func (r *Retrier) do(ctx context.Context, op func(ctx context.Context) error) error {
	if r.c.tracer == nil {
		return r.run(ctx, op)
	}
	a := &tracedRun{tr: r.c.tracer.tr, c: &r.c, op: op}
	defer func() {
		if a.span != nil { // the last attempt failed: the loop stopped, or a hook panicked
			a.close("stop")
		}
	}()
	return r.run(ctx, a.attempt)
}

// tracedRun wraps one loop's op: each call is an attempt with its span.
type tracedRun struct {
	tr   trace.Tracer
	c    *config
	op   func(context.Context) error
	n    int        // attempts made (the span's number, not a decision)
	span trace.Span // the last failed attempt's, open until its verdict is known
	end  time.Time  // when that attempt ended
}

func (a *tracedRun) attempt(ctx context.Context) error {
	var wait time.Duration
	if a.span != nil { // the engine retried
		wait = a.c.now().Sub(a.end)
		a.close("retry")
	}
	a.n++
	ctx, span := a.tr.Start(ctx, spanAttempt, trace.WithAttributes(
		attribute.Int(attrAttempt, a.n), attribute.Float64(attrWait, wait.Seconds())))
	ended := false
	defer func() {
		if !ended { // op panicked: its span ends, the panic goes on
			span.SetStatus(codes.Error, "panic")
			span.End()
		}
	}()
	err := a.op(ctx)
	ended = true
	if err == nil { // a success ends every loop
		span.SetAttributes(attribute.String(attrVerdict, "success"))
		span.End()
		return nil
	}
	span.SetAttributes(attribute.String(attrClass, a.c.errorClass(err)))
	span.SetStatus(codes.Error, err.Error())
	a.span, a.end = span, a.c.now()
	return err
}

// close ends the last failed attempt's span with verdict, at the time the
// attempt ended.
func (a *tracedRun) close(verdict string) {
	a.span.SetAttributes(attribute.String(attrVerdict, verdict))
	a.span.End(trace.WithTimestamp(a.end))
	a.span = nil
}

// errorClass names the kind of a failed attempt's error for a span.
func (c *config) errorClass(err error) string {
	switch {
	case asPermanent(err) != nil:
		return "permanent"
	}
	if _, ok := RetryAfterDelay(err); ok {
		return "retry_after"
	}
	return "transient"
}
