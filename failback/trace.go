package failback

import (
	"context"
	"maps"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/telemetry"
)

// traceContextKey is the attachment, reserved by a tracer (see
// WithPolicy), that keeps the W3C trace context of a call's first attempt.
// A Store persists it, so a retry after a restart links to the trace that
// queued the call.
const traceContextKey = telemetry.TraceAttachment

const spanAttempt = "rebound.attempt"

// invokeTraced is Invoke with a tracer: the first attempt in a span, the
// call queued with that span's traceparent.
func (f *Invoker) invokeTraced(ctx context.Context, inv *cluster.Invocation) (any, error) {
	ctx, span := f.cfg.tracer.Start(ctx, spanAttempt, trace.WithAttributes(
		attribute.Int("rebound.attempt", 1), attribute.Float64("rebound.attempt.wait", 0)))
	defer span.End()
	c := *inv
	c.Attachments = make(map[string]string, len(inv.Attachments)+1)
	maps.Copy(c.Attachments, inv.Attachments)
	delete(c.Attachments, traceContextKey) // the caller's value, if any, is not this call's
	propagation.TraceContext{}.Inject(ctx, attachmentCarrier(c.Attachments))
	target, res, err := f.first(ctx, &c)
	if err == nil {
		span.SetAttributes(attribute.String("rebound.verdict", "success"))
		return res, nil
	}
	ferr := f.firstFailure(ctx, &c, target, err)
	verdict := "stop"
	if ferr == nil {
		verdict = "retry" // queued
	}
	f.failedSpan(span, err, verdict)
	return nil, ferr
}

// startRetry starts the span of t's retry (t.attempts already counts it),
// a new root linked to the trace that queued t. Without a tracer it
// returns ctx and a nil span.
func (f *Invoker) startRetry(ctx context.Context, t *task) (context.Context, trace.Span) {
	if f.cfg.tracer == nil {
		return ctx, nil
	}
	since := t.ended
	if since == 0 {
		since = t.born
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(
		attribute.Int("rebound.attempt", int(t.attempts)),
		attribute.Float64("rebound.attempt.wait", max(time.Duration(f.now()-since), 0).Seconds()))}
	if sc := queuedBy(t.inv); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return f.cfg.tracer.Start(ctx, spanAttempt, opts...)
}

// endRetry ends the span of a retry by its outcome; a nil span is none.
func (f *Invoker) endRetry(span trace.Span, out outcome, err error) {
	if span == nil {
		return
	}
	switch {
	case out == outSucceeded:
		span.SetAttributes(attribute.String("rebound.verdict", "success"))
	case out == outRequeued:
		f.failedSpan(span, err, "retry")
	default:
		f.failedSpan(span, err, "stop")
	}
	span.End()
}

func (f *Invoker) failedSpan(span trace.Span, err error, verdict string) {
	class := "transient"
	switch _, ra := rebound.RetryAfterDelay(err); {
	case rebound.IsPermanent(err):
		class = "permanent"
	case !f.retryable(err):
		class = "not_transient"
	case ra:
		class = "retry_after"
	}
	span.SetAttributes(attribute.String("rebound.error.class", class), attribute.String("rebound.verdict", verdict))
	span.SetStatus(codes.Error, err.Error())
}

// queuedBy returns the span context kept in inv's Attachments, if any.
func queuedBy(inv *cluster.Invocation) trace.SpanContext {
	if inv.Attachments[traceContextKey] == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), attachmentCarrier(inv.Attachments))
	return trace.SpanContextFromContext(ctx)
}

// attachmentCarrier keeps the traceparent under traceContextKey, followed
// by a space and the tracestate when there is one (a traceparent has no
// space), so that a call carries one reserved attachment.
type attachmentCarrier map[string]string

func (c attachmentCarrier) Get(key string) string {
	parent, state, _ := strings.Cut(c[traceContextKey], " ")
	switch key {
	case "traceparent":
		return parent
	case "tracestate":
		return state
	}
	return ""
}

func (c attachmentCarrier) Set(key, value string) {
	parent, state, _ := strings.Cut(c[traceContextKey], " ")
	switch key {
	case "traceparent":
		parent = value
	case "tracestate":
		state = value
	default:
		return
	}
	if state != "" {
		parent += " " + state
	}
	c[traceContextKey] = parent
}

func (c attachmentCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }
