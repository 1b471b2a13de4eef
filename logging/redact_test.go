package logging_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/logging"
)

const secret = "hunter2"

func TestIsSensitiveKey(t *testing.T) {
	sensitive := []string{
		"password", "Password", "PASSWORD", "db_password", "passwd", "pwd", "passphrase",
		"secret", "secretKey", "SecretKey", "secret_key", "client-secret",
		"accessKey", "AccessKey", "access_key", "access-key-id", "ACCESS_KEY_ID",
		"token", "Token", "accessToken", "access_token", "x-auth-token", "X-Auth-Token", "refreshToken",
		"credential", "credentials", "Credentials",
		"apiKey", "api-key", "private_key", "Authorization", "cookie", "Set-Cookie",
		strings.Repeat("x", 100) + "Password", // longer than the stack buffer
	}
	for _, k := range sensitive {
		if !logging.IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = false, want true", k)
		}
	}
	normal := []string{
		"", "pw", "user", "username", "key", "keys", "host", "target", "component", "attempt",
		"delay", "error", "namespaceId", "serviceName", "groupName", "passage", "author", "access",
		strings.Repeat("y", 100),
	}
	for _, k := range normal {
		if logging.IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = true, want false", k)
		}
	}
}

func TestScrub(t *testing.T) {
	for in, want := range map[string]string{
		"":                                  "",
		"no pairs here":                     "no pairs here",
		"user: nacos":                       "user: nacos",
		"password: hunter2 user: nacos":     "password: [REDACTED] user: nacos",
		"Password=hunter2":                  "Password=[REDACTED]",
		"secretKey = 'abc', region=cn":      "secretKey = '[REDACTED]', region=cn",
		`{"x-auth-token":"abc","n":1}`:      `{"x-auth-token":"[REDACTED]","n":1}`,
		"GET /v1?accessToken=abc&ns=public": "GET /v1?accessToken=[REDACTED]&ns=public",
		"credentials:<abc>":                 "credentials:<[REDACTED]>",
		"token:(abc); next":                 "token:([REDACTED]); next",
		// Go's %+v of a struct such as the SDK's ClientConfig.
		"{Username:nacos Password:hunter2 AccessKey:AK SecretKey:SK Endpoint:}": "{Username:nacos Password:[REDACTED] AccessKey:[REDACTED] SecretKey:[REDACTED] Endpoint:}",
		// User information in URLs, also inside error texts.
		`Post "http://nacos:hunter2@10.0.0.1:8848/nacos/v1/auth/login": dial tcp: refused`: `Post "http://nacos:[REDACTED]@10.0.0.1:8848/nacos/v1/auth/login": dial tcp: refused`,
		"etcd://root:s3cr3t@host:2379 and https://u:p@x/?password=q":                       "etcd://root:[REDACTED]@host:2379 and https://u:[REDACTED]@x/?password=[REDACTED]",
		"no userinfo: http://host:8848/path@x":                                             "no userinfo: http://host:8848/path@x",
	} {
		if got := logging.Scrub(in); got != want {
			t.Errorf("Scrub(%q) =\n  %q\nwant\n  %q", in, got, want)
		}
	}
}

// What rebound itself writes: messages, error texts and string fields are
// scrubbed; a field with a sensitive key is redacted whole.
func TestRedactedScrubsMessagesErrorsAndStrings(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Redacted(zap.New(core)).With(zap.String("endpoint", "http://nacos:"+secret+"@host:8848"))
	wrapped := fmt.Errorf("subscribe orders: %w", errors.New(`Get "http://host/v1?accessToken=`+secret+`": refused`))
	l.Warn("login with password="+secret+" failed",
		zap.Error(wrapped),
		zap.NamedError("cause", errors.New("auth nacos:"+secret+"@host")),
		zap.String("dsn", "mysql://root:"+secret+"@db/x"),
		zap.String("password", secret),
		zap.String("user", "nacos"),
		zap.Int("attempt", 3),
	)
	e := logs.TakeAll()[0]
	var buf bytes.Buffer
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	out, err := enc.EncodeEntry(e.Entry, e.Context)
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(out.Bytes())
	if strings.Contains(buf.String(), secret) {
		t.Errorf("the secret reached the output: %s", buf.String())
	}
	cm := e.ContextMap()
	want := map[string]any{
		"endpoint": "http://nacos:[REDACTED]@host:8848",
		"error":    `subscribe orders: Get "http://host/v1?accessToken=[REDACTED]": refused`,
		"cause":    "auth nacos:[REDACTED]@host",
		"dsn":      "mysql://root:[REDACTED]@db/x",
		"password": logging.RedactedValue,
		"user":     "nacos",
		"attempt":  int64(3),
	}
	if !reflect.DeepEqual(cm, want) {
		t.Errorf("fields =\n  %#v\nwant\n  %#v", cm, want)
	}
	if e.Message != "login with password=[REDACTED] failed" {
		t.Errorf("message = %q", e.Message)
	}
}

// An error without a credential keeps its type (and so zap's errorVerbose).
func TestRedactedKeepsCleanErrors(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Redacted(zap.New(core))
	errClean := errors.New("registry unreachable")
	fs := []zap.Field{zap.Error(errClean), zap.String("key", "orders")}
	l.Info("x", fs...)
	got := logs.TakeAll()[0].Context
	if got[0].Type != zapcore.ErrorType || got[0].Interface != errClean {
		t.Errorf("clean error became %v", got[0])
	}
	if fs[0].Type != zapcore.ErrorType {
		t.Error("the caller's fields were modified")
	}
}

// RedactCore keeps the wrapped core's decisions: per-branch levels of a
// Tee, sampling, the level reported to zap.
func TestRedactCoreKeepsCoreDecisions(t *testing.T) {
	debugCore, debugLogs := observer.New(zapcore.DebugLevel)
	errorCore, errorLogs := observer.New(zapcore.ErrorLevel)
	l := zap.New(logging.RedactCore(zapcore.NewTee(debugCore, errorCore)))
	l.Info("info", zap.String("token", secret))
	l.Error("error", zap.String("token", secret))
	if debugLogs.Len() != 2 || errorLogs.Len() != 1 {
		t.Fatalf("tee branches got %d and %d lines, want 2 and 1", debugLogs.Len(), errorLogs.Len())
	}
	for _, e := range append(debugLogs.All(), errorLogs.All()...) {
		if e.ContextMap()["token"] != logging.RedactedValue {
			t.Errorf("%q: token = %v", e.Message, e.ContextMap()["token"])
		}
	}

	// Sampling: first 1 per message per hour, then none.
	sampledCore, sampled := observer.New(zapcore.DebugLevel)
	sl := zap.New(logging.RedactCore(zapcore.NewSamplerWithOptions(sampledCore, time.Hour, 1, 0)))
	for range 3 {
		sl.Info("same", zap.String("token", secret))
	}
	if sampled.Len() != 1 || sampled.All()[0].ContextMap()["token"] != logging.RedactedValue {
		t.Errorf("sampled: %v, want one redacted line", sampled.All())
	}

	infoCore, infoLogs := observer.New(zapcore.InfoLevel)
	il := logging.Redacted(zap.New(infoCore))
	if il.Level() != zapcore.InfoLevel || il.Core().Enabled(zapcore.DebugLevel) {
		t.Errorf("Level() = %v, Debug enabled = %v; want Info, false", il.Level(), il.Core().Enabled(zapcore.DebugLevel))
	}
	il.Debug("dropped", zap.String("token", secret))
	if infoLogs.Len() != 0 {
		t.Errorf("Debug written by an Info core: %v", infoLogs.All())
	}

	// Direct Write on the core redacts too.
	rc := logging.RedactCore(infoCore)
	if err := rc.Write(zapcore.Entry{Level: zapcore.InfoLevel, Message: "direct"}, []zapcore.Field{zap.String("pwd", secret)}); err != nil {
		t.Fatal(err)
	}
	if got := infoLogs.TakeAll()[0].ContextMap()["pwd"]; got != logging.RedactedValue {
		t.Errorf("direct Write: pwd = %v", got)
	}
}

func TestRedactCoreNilAndIdempotent(t *testing.T) {
	nop := logging.RedactCore(nil)
	if nop == nil || nop.Enabled(zapcore.FatalLevel) {
		t.Errorf("RedactCore(nil) = %v, want a no-op core", nop)
	}
	if l := logging.Redacted(nil); l == nil || l.Core().Enabled(zapcore.FatalLevel) {
		t.Errorf("Redacted(nil) = %v, want a no-op logger", l)
	}
	core, _ := observer.New(zapcore.DebugLevel)
	once := logging.RedactCore(core)
	if twice := logging.RedactCore(once); twice != once {
		t.Error("RedactCore wrapped a redacting core again")
	}
	l := logging.Redacted(zaptest.NewLogger(t))
	if logging.Redacted(l) != l {
		t.Error("Redacted wrapped a redacted logger again")
	}
	l.Info("through zaptest", zap.String("password", secret)) // shows in -v output as [REDACTED]
}
