package rebound

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

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
