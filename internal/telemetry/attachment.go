package telemetry

// TraceAttachment is the cluster.Invocation attachment, reserved by
// failback's tracer, that keeps the W3C trace context of a call's first
// attempt: the traceparent, then a space and the tracestate if any. A
// Store persists it with the call. A transport that sends attachments as
// headers leaves it out: the trace travels in the context.
const TraceAttachment = "rebound-traceparent"
