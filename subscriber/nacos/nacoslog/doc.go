// Package nacoslog sends nacos-sdk-go/v2's own log output into a zap
// logger, under control: the SDK's lines are throttled per call site
// (one per interval, the next one with the count of what was dropped),
// stack traces are kept to Debug, credentials are scrubbed from the
// messages (logging.Scrub), and the caller is the SDK code that logged.
//
// Install points the SDK's process-wide logger at the bridge; call it
// after every clients.NewNamingClient or clients.NewConfigClient, which
// replace that logger (see Install). New returns the bridge itself.
//
// During a registry outage nacos-sdk-go v2.3.2 logs a reconnect Warn about
// every 5 s and, for each request made while disconnected, three Errors
// with a stack trace in the message. With the defaults (Warn, one line per
// call site per minute) a 10-minute outage writes a few dozen lines
// instead of hundreds (see TestTenMinuteOutageReplay and the figures in
// the README).
//
// This package lives beside the Nacos adapter so that package logging, and
// so failback, cluster and subscriber, do not import nacos-sdk-go (whose
// package init builds a zap logger and registers Prometheus collectors on
// the global registry).
package nacoslog
