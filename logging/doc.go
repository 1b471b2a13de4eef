// Package logging integrates rebound with go.uber.org/zap: retry-loop
// logging that stays quiet during long outages, and redaction of
// credentials.
//
// # Throttled retry logs
//
// A Loop logs one long-lived retry loop. It is a rebound.Observer: give it
// to rebound.WithObserver. An outage produces a handful of lines, however
// long it lasts:
//
//	WARN  retry loop failing        component, caller's fields, attempt, delay, error
//	DEBUG retry attempt failed      attempt, delay, error           (each further failure)
//	WARN  retry loop still failing  attempt, delay, downtime, error (after 1m, 2m, 4m, ... of downtime,
//	                                                                 then at most one an hour)
//	INFO  retry loop recovered      attempts, downtime
//	ERROR retry loop gave up        attempts, downtime, error
//	INFO  retry loop stopped        attempts, downtime, error       (instead of "gave up" when
//	                                                                 the error is context.Canceled)
//
// The messages are a contract: match on these strings. After a recovery or
// a give-up the Loop starts afresh. Details: docs/observability.md.
//
// # Redaction
//
// Scrub removes credentials from free text; Redacted applies it to a
// logger. Every Loop logs through it, and so does the nacos-sdk-go bridge
// (subscriber/nacos/nacoslog). Nothing here uses zap's global logger; a
// nil *zap.Logger means zap.NewNop().
package logging
