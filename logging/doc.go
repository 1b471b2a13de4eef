// Package logging integrates rebound with go.uber.org/zap: retry-loop
// logging that stays quiet during long outages, and redaction of
// credentials.
//
// # Throttled retry logs
//
// A Loop logs one long-lived retry loop (a subscription, a failback task).
// Hook it into rebound.Retry with rebound.WithObserver(lp) (a Loop is a
// rebound.Observer), or call Failed, Succeeded and GaveUp from a
// hand-written loop. An outage produces a handful of lines, however long it lasts:
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
// A loop failing for an hour with a 30 s retry cap writes 7 Warn lines and
// one Info line instead of 120 lines. A success that follows no failure is
// logged at Debug only. After a recovery or a give-up the Loop starts
// afresh, so the next outage is announced again. The messages are a
// contract: match on these strings. A deadline (context.DeadlineExceeded)
// is a give-up; only context.Canceled is "stopped".
//
// Downtime is measured with time.Now from the first failure of an outage
// (testing/synctest virtualises it); reminders come when it has doubled
// since the last one, their spacing capped at an hour. Each state change is
// logged once; lines from concurrent calls may be written in either order,
// after the Loop's lock is released (zap hooks never run under it). One
// Loop tracks an outage across rebound.Retry calls, from the first failure
// to the next success or give-up, so keep one per long-lived loop. Lines
// written through Observe report the caller outside package rebound (and
// cenkalti/backoff) that ran the loop.
//
// # Redaction
//
// Scrub removes credentials from free text: the value after a sensitive
// key ("password=x", `"accessToken":"x"`, "SecretKey:x", a quoted value
// whole), the credentials of Authorization and Cookie headers
// ("Authorization: Bearer x", every cookie of "Cookie: a=1; b=2") and the
// password in a URL ("http://user:x@host", also when it holds '@'). Redacted
// applies it to what rebound writes: every message, every
// error text and string field; a field whose key is sensitive is redacted
// whole. Every Loop logs through it, and so does the nacos-sdk-go bridge in
// package github.com/rebound-go/rebound/subscriber/nacos/nacoslog, which
// is where the SDK's own messages are scrubbed.
//
// This package imports no registry client: the bridge for nacos-sdk-go's
// logger lives beside the Nacos adapter (subscriber/nacos/nacoslog).
//
// Nothing in this package uses zap's global logger. A nil *zap.Logger
// argument always means zap.NewNop().
package logging
