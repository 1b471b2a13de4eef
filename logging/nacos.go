package logging

import (
	"fmt"
	"regexp"
	"strings"

	nacoslogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// InstallNacosLogger makes nacos-sdk-go/v2 write its log output into l, at
// level and above: it calls the SDK's process-wide
// common/logger.SetLogger(NewNacosLogger(l, level)). A nil l discards the
// SDK's output.
//
// Install it AFTER creating the SDK's clients, and again after creating any
// later one. In nacos-sdk-go v2.3.2, clients.NewNamingClient (through
// naming_client.NewNamingClientWithRamCredentialProvider) and
// clients.NewConfigClient (through
// config_client.NewConfigClientWithRamCredentialProvider) both call
// logger.InitLogger(logger.BuildLoggerConfig(clientConfig)), which replaces
// the global logger with a new one writing to
// ClientConfig.LogDir/nacos-sdk.log (a lumberjack file, plus stdout if
// ClientConfig.AppendToStdout) at ClientConfig.LogLevel. A logger installed
// before that call is silently dropped. What the SDK logs while the client
// is being built (it connects to the server inside NewNamingClient) always
// goes to that file. Before any client exists, the SDK's package init has
// set a zap development logger writing to stderr.
//
// The SDK logger is global: InstallNacosLogger affects every SDK client in
// the process, and the last call wins. It is safe to call concurrently with
// the SDK's logging (the SDK guards its logger with a lock).
func InstallNacosLogger(l *zap.Logger, level zapcore.Level) {
	nacoslogger.SetLogger(NewNacosLogger(l, level))
}

// NewNacosLogger returns a nacos-sdk-go/v2 common/logger.Logger that writes
// to l the SDK's calls at level and above (SDK Debug, Info, Warn and Error
// map to the zap levels of the same name; l's own level still applies). A
// nil l means zap.NewNop(). The SDK's arguments are formatted like
// zap.SugaredLogger does (fmt.Sprint, fmt.Sprintf) only when the level is
// enabled.
//
// The SDK puts data into its messages, not into fields: request parameters
// as JSON, configuration, partial keys. Values that follow a sensitive key
// in a message ("password:[x]", `"accessToken":"x"`, "token=x"; keys as in
// IsSensitiveKey) are replaced with "[REDACTED]". Caller information, if l
// records it, points at the SDK code that logged.
//
// The result is safe for concurrent use.
func NewNacosLogger(l *zap.Logger, level zapcore.Level) nacoslogger.Logger {
	if l == nil {
		l = zap.NewNop()
	}
	// Frames between the SDK's call site and l.Check: the SDK's package
	// function (logger.Infof), the bridge method, logf.
	l = l.WithOptions(
		zap.AddCallerSkip(3),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return minLevelCore{Core: c, min: level} }),
	)
	return &nacosBridge{l: l}
}

type nacosBridge struct{ l *zap.Logger }

var _ nacoslogger.Logger = (*nacosBridge)(nil)

func (b *nacosBridge) Debug(args ...any) { b.log(zapcore.DebugLevel, args) }
func (b *nacosBridge) Info(args ...any)  { b.log(zapcore.InfoLevel, args) }
func (b *nacosBridge) Warn(args ...any)  { b.log(zapcore.WarnLevel, args) }
func (b *nacosBridge) Error(args ...any) { b.log(zapcore.ErrorLevel, args) }

func (b *nacosBridge) Debugf(format string, args ...any) { b.logf(zapcore.DebugLevel, format, args) }
func (b *nacosBridge) Infof(format string, args ...any)  { b.logf(zapcore.InfoLevel, format, args) }
func (b *nacosBridge) Warnf(format string, args ...any)  { b.logf(zapcore.WarnLevel, format, args) }
func (b *nacosBridge) Errorf(format string, args ...any) { b.logf(zapcore.ErrorLevel, format, args) }

// log and logf must be called directly by the exported methods (see the
// caller skip in NewNacosLogger).
func (b *nacosBridge) log(lvl zapcore.Level, args []any) {
	if !b.l.Core().Enabled(lvl) {
		return
	}
	if ce := b.l.Check(lvl, ScrubMessage(fmt.Sprint(args...))); ce != nil {
		ce.Write()
	}
}

func (b *nacosBridge) logf(lvl zapcore.Level, format string, args []any) {
	if !b.l.Core().Enabled(lvl) {
		return
	}
	msg := format
	switch {
	case format == "":
		msg = fmt.Sprint(args...)
	case len(args) > 0:
		msg = fmt.Sprintf(format, args...)
	}
	if ce := b.l.Check(lvl, ScrubMessage(msg)); ce != nil {
		ce.Write()
	}
}

// minLevelCore drops entries below min; it may raise the wrapped core's
// level but never lowers it (unlike zapcore.NewIncreaseLevelCore, it
// accepts any min).
type minLevelCore struct {
	zapcore.Core
	min zapcore.Level
}

func (c minLevelCore) Enabled(lvl zapcore.Level) bool {
	return lvl >= c.min && c.Core.Enabled(lvl)
}

func (c minLevelCore) Level() zapcore.Level {
	return max(c.min, zapcore.LevelOf(c.Core))
}

func (c minLevelCore) With(fields []zapcore.Field) zapcore.Core {
	return minLevelCore{Core: c.Core.With(fields), min: c.min}
}

func (c minLevelCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Level < c.min {
		return ce
	}
	return c.Core.Check(ent, ce)
}

// keyValue finds "key: value", "key=value", `"key":"value"`, "key:[value]"
// and "key:<value>" in free text. Group 1 is the key, group 2 the value.
var keyValue = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_.\-]*)["']?\s*[:=]\s*["'\[<(]?([^\s"'\]>)<({},&;]+)`)

// ScrubMessage returns s with the value that follows each sensitive key
// (see IsSensitiveKey) replaced by "[REDACTED]". It recognises key-value
// pairs written as "key: value", "key=value", `"key":"value"`,
// "key:[value]" and "key:<value>"; values end at white space, a quote, a
// comma, '&', ';' or a closing bracket. Text without ':' or '=' is
// returned as is, without allocating.
func ScrubMessage(s string) string {
	if !strings.ContainsAny(s, ":=") {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range keyValue.FindAllStringSubmatchIndex(s, -1) {
		if !IsSensitiveKey(s[m[2]:m[3]]) {
			continue
		}
		b.WriteString(s[last:m[4]])
		b.WriteString(RedactedValue)
		last = m[5]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
