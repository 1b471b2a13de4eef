package rebound

import (
	"go.opentelemetry.io/otel/trace"
)

// The attributes of an attempt's span (docs/tracing.md).
const (
	attrAttempt = "rebound.attempt"      // int: 1 for the first attempt
	attrWait    = "rebound.attempt.wait" // float64 s: since the previous attempt ended (0 for the first)
	attrClass   = "rebound.error.class"  // permanent | retry_after | transient
	attrVerdict = "rebound.verdict"      // success | retry | stop
	spanAttempt = "rebound.attempt"      // the span's name
)

type tracer struct{ tr trace.Tracer }
