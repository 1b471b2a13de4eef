// Package nacoslog sends nacos-sdk-go/v2's own log output into a zap
// logger, under control: the SDK's lines are throttled per call site
// (the first, then one per interval with the spacing doubling while the
// site keeps logging, each with the count of what was dropped),
// stack traces are kept to Debug, credentials are scrubbed from the
// messages (logging.Scrub), and the caller is the SDK code that logged.
//
// Install points the SDK's process-wide logger at the bridge; call it
// after every clients.NewNamingClient or clients.NewConfigClient, which
// replace that logger (see Install). New returns the bridge itself, as
// the SDK's logger interface.
//
// During a registry outage nacos-sdk-go v2.3.2 logs a reconnect Warn about
// every 5 s, health-check and request Errors with a stack trace in the
// message, about 10 lines a second in all with a rebound Manager
// retrying 20 subscriptions (TestRealOutageLineCount). With the defaults
// (Warn; lines of a call site at 0, 1m, 3m, 7m, ...) a 10-minute outage
// writes at most 4 lines per call site (TestTenMinuteOutageReplay,
// TestThrottleSpacingDoubles; figures in docs/measurements.md).
//
// This package lives beside the Nacos adapter so that package logging, and
// so failback, cluster and subscriber, do not import nacos-sdk-go (whose
// package init builds a zap logger and registers Prometheus collectors on
// the global registry).
package nacoslog
