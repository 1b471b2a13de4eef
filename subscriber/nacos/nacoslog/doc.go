// Package nacoslog sends nacos-sdk-go/v2's own log output into a zap
// logger, under control: the SDK's lines are throttled per call site
// (the first, then one per interval with the spacing doubling while the
// site keeps logging, each with the count of what was dropped),
// stack traces are kept to Debug, credentials are scrubbed from the
// messages (logging.Scrub), and the caller is the SDK code that logged.
//
// During a 10-minute outage it writes at most 4 lines per SDK call site
// (docs/observability.md). It lives beside the Nacos adapter so that no
// other package imports nacos-sdk-go.
package nacoslog
