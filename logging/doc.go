// Package logging integrates rebound with go.uber.org/zap: retry-loop
// logging that stays quiet during long outages, redaction of credentials,
// and a bridge that sends nacos-sdk-go/v2's own log output into a zap
// logger.
//
// # Throttled retry logs
//
// A Loop logs one long-lived retry loop (a subscription, a failback task).
// Hook it into rebound.Retry with rebound.WithNotify(lp.Notify) (or use
// RetryNotify), or call Failed, Succeeded and GaveUp from a hand-written
// loop. An outage produces a handful of lines, however long it lasts:
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
// afresh, so the next outage is announced again.
//
// # Redaction
//
// RedactCore wraps a zapcore.Core so that fields whose key looks like a
// credential (see IsSensitiveKey) are written as "[REDACTED]", also inside
// zap.Object, zap.Dict, zap.Objects, zap.Inline and zap.Any values (maps,
// slices and structs). Redacted applies it to a *zap.Logger. Every Loop logs
// through it.
//
// # nacos-sdk-go
//
// InstallNacosLogger points nacos-sdk-go/v2's process-wide logger at a zap
// logger. It must be called after every clients.NewNamingClient or
// clients.NewConfigClient call, because each of those replaces the SDK's
// global logger with a file logger (see InstallNacosLogger).
//
// Nothing in this package uses zap's global logger. A nil *zap.Logger
// argument always means zap.NewNop().
package logging
