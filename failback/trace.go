package failback

import (
	"context"
	"maps"
	"strings"

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
