package logging_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	nacoslogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/logging"
)

// keepNacosLogger restores the SDK's process-wide logger after the test.
// Tests that call it must not run in parallel.
func keepNacosLogger(t *testing.T) {
	old := nacoslogger.GetLogger()
	t.Cleanup(func() { nacoslogger.SetLogger(old) })
}

// logAllLevels logs through the SDK's package functions, as the SDK does.
func logAllLevels() {
	nacoslogger.Debug("debug ", 1)
	nacoslogger.Debugf("debugf %d", 2)
	nacoslogger.Info("info ", 3)
	nacoslogger.Infof("infof %d", 4)
	nacoslogger.Warn("warn ", 5)
	nacoslogger.Warnf("warnf %d", 6)
	nacoslogger.Error("error ", 7)
	nacoslogger.Errorf("errorf %d", 8)
}

type line struct {
	lvl zapcore.Level
	msg string
}

func lines(logs *observer.ObservedLogs) []line {
	var out []line
	for _, e := range logs.TakeAll() {
		out = append(out, line{e.Level, e.Message})
	}
	return out
}

func TestInstallNacosLoggerLevels(t *testing.T) {
	keepNacosLogger(t)
	l, logs := newObserved(zapcore.DebugLevel)

	logging.InstallNacosLogger(l, zapcore.WarnLevel)
	logAllLevels()
	want := []line{
		{zapcore.WarnLevel, "warn 5"}, {zapcore.WarnLevel, "warnf 6"},
		{zapcore.ErrorLevel, "error 7"}, {zapcore.ErrorLevel, "errorf 8"},
	}
	if got := lines(logs); !equalLines(got, want) {
		t.Errorf("at Warn: got %v, want %v", got, want)
	}

	logging.InstallNacosLogger(l, zapcore.DebugLevel)
	logAllLevels()
	want = []line{
		{zapcore.DebugLevel, "debug 1"}, {zapcore.DebugLevel, "debugf 2"},
		{zapcore.InfoLevel, "info 3"}, {zapcore.InfoLevel, "infof 4"},
		{zapcore.WarnLevel, "warn 5"}, {zapcore.WarnLevel, "warnf 6"},
		{zapcore.ErrorLevel, "error 7"}, {zapcore.ErrorLevel, "errorf 8"},
	}
	if got := lines(logs); !equalLines(got, want) {
		t.Errorf("at Debug: got %v, want %v", got, want)
	}

	// The logger's own level still applies: an Info logger drops SDK Debug
	// even when the bridge is installed at Debug.
	il, ilogs := newObserved(zapcore.InfoLevel)
	logging.InstallNacosLogger(il, zapcore.DebugLevel)
	logAllLevels()
	if got := lines(ilogs); len(got) != 6 || got[0] != (line{zapcore.InfoLevel, "info 3"}) {
		t.Errorf("Info logger, bridge at Debug: got %v, want the 6 lines from Info up", got)
	}

	// A level above Error silences the SDK; a nil logger discards.
	logging.InstallNacosLogger(l, zapcore.DPanicLevel)
	logAllLevels()
	logging.InstallNacosLogger(nil, zapcore.DebugLevel)
	logAllLevels()
	if n := logs.Len(); n != 0 {
		t.Errorf("silenced SDK wrote %d lines: %v", n, logs.All())
	}
}

func equalLines(a, b []line) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The entry's caller is the code that called the SDK's logger, not the
// bridge.
func TestNacosLoggerCaller(t *testing.T) {
	keepNacosLogger(t)
	core, logs := observer.New(zapcore.DebugLevel)
	logging.InstallNacosLogger(zap.New(core, zap.AddCaller()), zapcore.DebugLevel)

	_, file, line, _ := runtime.Caller(0)
	nacoslogger.Infof("hello %s", "caller")
	nacoslogger.Warn("hello")

	for _, e := range logs.All() {
		if !e.Caller.Defined || filepath.Base(e.Caller.File) != filepath.Base(file) {
			t.Errorf("%q: caller = %v, want %s", e.Message, e.Caller, filepath.Base(file))
		}
	}
	if got := logs.All()[0].Caller.Line; got != line+1 {
		t.Errorf("caller line = %d, want %d", got, line+1)
	}
}

// Credentials in the SDK's messages are scrubbed (message formats taken
// from nacos-sdk-go v2.3.2).
func TestNacosLoggerScrubsMessages(t *testing.T) {
	keepNacosLogger(t)
	l, logs := newObserved(zapcore.DebugLevel)
	logging.InstallNacosLogger(l, zapcore.DebugLevel)

	// common/encryption/kms_client.go
	nacoslogger.Debugf("init kms client with endpoint:[%s], clientKeyContent:[%s], password:[%s]\n",
		"kms.example", "abc", secret)
	// common/nacos_server/nacos_server.go
	nacoslogger.Errorf("api<%s>,method:<%s>, params:<%s>, call domain error:<%+v> , result:<%s>",
		"/nacos/v1/ns/instance", "GET", `{"accessToken":"`+secret+`","serviceName":"orders"}`, "timeout", "")
	nacoslogger.Info("login with username=nacos&password=", secret, "&namespace=public")

	got := logs.TakeAll()
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3", len(got))
	}
	for _, e := range got {
		if strings.Contains(e.Message, secret) {
			t.Errorf("message contains the secret: %s", e.Message)
		}
	}
	want := []string{
		"init kms client with endpoint:[kms.example], clientKeyContent:[abc], password:[[REDACTED]]\n",
		`api</nacos/v1/ns/instance>,method:<GET>, params:<{"accessToken":"[REDACTED]","serviceName":"orders"}>, call domain error:<timeout> , result:<>`,
		"login with username=nacos&password=[REDACTED]&namespace=public",
	}
	for i, w := range want {
		if got[i].Message != w {
			t.Errorf("message %d =\n  %q\nwant\n  %q", i, got[i].Message, w)
		}
	}
}

func TestScrubMessage(t *testing.T) {
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
	} {
		if got := logging.ScrubMessage(in); got != want {
			t.Errorf("ScrubMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// The claim InstallNacosLogger documents: creating an SDK client replaces
// the SDK's global logger. NewNamingClient and NewConfigClient both run
// exactly logger.InitLogger(logger.BuildLoggerConfig(clientConfig)); doing
// the same here shows that a bridge installed before is dropped, and one
// installed after stays.
func TestNacosClientInitReplacesBridge(t *testing.T) {
	keepNacosLogger(t)
	l, logs := newObserved(zapcore.DebugLevel)
	logging.InstallNacosLogger(l, zapcore.DebugLevel)
	bridge := nacoslogger.GetLogger()

	cfg := constant.ClientConfig{LogDir: t.TempDir(), LogLevel: "debug"}
	if err := nacoslogger.InitLogger(nacoslogger.BuildLoggerConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	if got := nacoslogger.GetLogger(); got == bridge {
		t.Fatal("InitLogger kept the installed bridge; the documented ordering rule is wrong")
	} else if _, ok := got.(*nacoslogger.NacosLogger); !ok {
		t.Errorf("after InitLogger the SDK logger is %T, want *logger.NacosLogger", got)
	}
	// (Not logging through the SDK's file logger here: lumberjack would
	// start a goroutine that never stops.)

	logging.InstallNacosLogger(l, zapcore.DebugLevel)
	nacoslogger.Warn("after re-install")
	if got := lines(logs); len(got) != 1 || got[0].msg != "after re-install" {
		t.Errorf("got %v, want the line logged after re-installing", got)
	}
}

// The bridge's level filter survives zap's With and reports its level.
func TestNacosLoggerLevelWithFields(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := zap.New(core).With(zap.String("component", "nacos-sdk"))
	b := logging.NewNacosLogger(l, zapcore.InfoLevel)
	b.Debugf("dropped %d", 1)
	b.Infof("kept %d", 2)
	b.Infof("") // like zap's sugar: an empty template with no args logs ""
	if got := logs.All(); len(got) != 2 || got[0].Message != "kept 2" || got[0].ContextMap()["component"] != "nacos-sdk" {
		t.Errorf("got %v", got)
	}
}
