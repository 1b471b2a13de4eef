package nacoslog_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/http_agent"
	nacoslogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber/nacos/nacoslog"
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

func TestInstallLevels(t *testing.T) {
	keepNacosLogger(t)
	l, logs := newObserved(zapcore.DebugLevel)

	install(t, l, zapcore.WarnLevel)
	logAllLevels()
	want := []line{
		{zapcore.WarnLevel, "warn 5"}, {zapcore.WarnLevel, "warnf 6"},
		{zapcore.ErrorLevel, "error 7"}, {zapcore.ErrorLevel, "errorf 8"},
	}
	if got := lines(logs); !equalLines(got, want) {
		t.Errorf("at Warn: got %v, want %v", got, want)
	}

	install(t, l, zapcore.DebugLevel)
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
	install(t, il, zapcore.DebugLevel)
	logAllLevels()
	if got := lines(ilogs); len(got) != 6 || got[0] != (line{zapcore.InfoLevel, "info 3"}) {
		t.Errorf("Info logger, bridge at Debug: got %v, want the 6 lines from Info up", got)
	}

	// A level above Error silences the SDK; a nil logger discards.
	install(t, l, zapcore.DPanicLevel)
	logAllLevels()
	install(t, nil, zapcore.DebugLevel)
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
	install(t, zap.New(core, zap.AddCaller()), zapcore.DebugLevel)

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
	install(t, l, zapcore.DebugLevel)

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

// The claim Install documents: creating an SDK client replaces
// the SDK's global logger. NewNamingClient and NewConfigClient both run
// exactly logger.InitLogger(logger.BuildLoggerConfig(clientConfig)); doing
// the same here shows that a bridge installed before is dropped, and one
// installed after stays.
func TestNacosClientInitReplacesBridge(t *testing.T) {
	keepNacosLogger(t)
	l, logs := newObserved(zapcore.DebugLevel)
	install(t, l, zapcore.DebugLevel)
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

	install(t, l, zapcore.DebugLevel)
	nacoslogger.Warn("after re-install")
	if got := lines(logs); len(got) != 1 || got[0].msg != "after re-install" {
		t.Errorf("got %v, want the line logged after re-installing", got)
	}
}

// The bridge's level filter survives zap's With and reports its level.
func TestNacosLoggerLevelWithFields(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := zap.New(core).With(zap.String("component", "nacos-sdk"))
	b := mustNew(t, l, nacoslog.WithLevel(zapcore.InfoLevel))
	b.Debugf("dropped %d", 1)
	b.Infof("kept %d", 2)
	b.Infof("") // like zap's sugar: an empty template with no args logs ""
	if got := logs.All(); len(got) != 2 || got[0].Message != "kept 2" || got[0].ContextMap()["component"] != "nacos-sdk" {
		t.Errorf("got %v", got)
	}
}

const secret = "hunter2"

// newObserved returns a logger writing into an observer core at lvl.
func newObserved(lvl zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(lvl)
	return zap.New(core), logs
}

// install installs the bridge; the test must have called keepNacosLogger.
func install(t *testing.T, l *zap.Logger, min zapcore.Level) {
	t.Helper()
	if err := nacoslog.Install(l, min); err != nil {
		t.Fatal(err)
	}
}

func mustNew(t *testing.T, l *zap.Logger, opts ...nacoslog.Option) nacoslogger.Logger {
	t.Helper()
	b, err := nacoslog.New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOptionErrors(t *testing.T) {
	for _, lvl := range []zapcore.Level{zapcore.InvalidLevel, zapcore.FatalLevel + 1} {
		err := nacoslog.Install(nil, lvl)
		var ae *rebound.ArgumentError
		if !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Func != "nacoslog.Install" || ae.Arg != "min" {
			t.Errorf("Install with level %v = %v; want an ArgumentError naming Install's min", lvl, err)
		}
	}
	b, err := nacoslog.New(nil, nacoslog.WithInterval(-time.Second))
	var ae *rebound.ArgumentError
	if b != nil || !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Func != "nacoslog.WithInterval" {
		t.Errorf("New with a negative interval = %v, %v; want an ArgumentError naming the option", b, err)
	}
	if _, err := nacoslog.New(nil, nil, nacoslog.WithInterval(0)); err != nil {
		t.Errorf("nil option or zero interval: %v", err)
	}
}

// Repeats of one SDK call site are written once per interval, the next one
// with the count of what was dropped; other call sites are independent.
func TestThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, logs := newObserved(zapcore.DebugLevel)
		b := mustNew(t, l, nacoslog.WithInterval(time.Minute))
		for i := range 30 { // 30 s of the SDK's reconnect loop, one line a second
			b.Warnf("%s fail to connect server, after trying %d times, last try server is %+v, error=%v",
				"client-1", i, "{serverIp:127.0.0.1}", "connection refused")
			b.Error("client sendHealthCheck failed,err=", i)
			time.Sleep(time.Second)
		}
		if got := logs.TakeAll(); len(got) != 2 {
			t.Fatalf("first 30 s: %d lines, want 2 (one per call site): %v", len(got), got)
		}
		time.Sleep(time.Minute)
		b.Warnf("%s fail to connect server, after trying %d times, last try server is %+v, error=%v", "client-1", 99, "x", "y")
		got := logs.TakeAll()
		if len(got) != 1 || got[0].ContextMap()["dropped"] != int64(29) {
			t.Fatalf("after the interval: %v, want one line with dropped=29", got)
		}
		b.Warnf("other %d", 1) // another call site is not throttled by the first
		if logs.Len() != 1 {
			t.Errorf("another call site was throttled")
		}
	})
}

// While a call site keeps logging, its spacing doubles: one line a second
// for 10 minutes is written at 0, 1m, 3m and 7m. After a quiet spell it
// starts over.
func TestThrottleSpacingDoubles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, logs := newObserved(zapcore.DebugLevel)
		b := mustNew(t, l)
		start := time.Now()
		var at []time.Duration
		for range 600 {
			b.Warnf("fail to connect server, after trying %d times", 1)
			if n := logs.Len(); n > len(at) {
				at = append(at, time.Since(start))
			}
			time.Sleep(time.Second)
		}
		want := []time.Duration{0, time.Minute, 3 * time.Minute, 7 * time.Minute}
		if !slices.Equal(at, want) {
			t.Errorf("lines at %v, want %v", at, want)
		}
		if d := logs.All()[3].ContextMap()["dropped"]; d != int64(239) {
			t.Errorf("dropped before the 7m line = %v, want 239", d)
		}
		logs.TakeAll()
		time.Sleep(30 * time.Minute) // quiet for longer than the spacing (8m)
		b.Warnf("fail to connect server, after trying %d times", 1)
		time.Sleep(time.Minute)
		b.Warnf("fail to connect server, after trying %d times", 1)
		if got := logs.TakeAll(); len(got) != 2 {
			t.Errorf("after a quiet spell: %d lines, want 2 (the spacing starts over at 1m)", len(got))
		}
	})
}

// A 10-minute outage, as nacos-sdk-go v2.3.2 logs it: the reconnect loop's
// Warn every ~5 s (rpc_client.go: retryTurns*100 ms, capped at 5 s), and
// for each subscribe a rebound Manager retries (here every 30 s, its
// capped backoff) three "Send request fail" Errors with a stack trace in
// the message. At Warn the bridge writes under 50 lines.
func TestTenMinuteOutageReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, logs := newObserved(zapcore.DebugLevel)
		b := mustNew(t, l) // the defaults: Warn, 1m
		stack := "client not connected, current status:UNHEALTHY\n" +
			"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc.(*RpcClient).Request\n" +
			"\t/go/pkg/mod/github.com/nacos-group/nacos-sdk-go/v2@v2.3.2/common/remote/rpc/rpc_client.go:583\n" +
			"runtime.goexit\n\t/usr/local/go/src/runtime/asm_amd64.s:1700"
		calls := 0
		for s := 0; s < 600; s++ {
			if s%5 == 0 {
				b.Warnf("%s fail to connect server, after trying %d times, last try server is %+v, error=%v",
					"8f3c", s/5, "{serverIp:127.0.0.1 serverPort:8848}", "connection refused")
				calls++
			}
			if s%30 == 0 {
				for r := range 3 {
					b.Errorf("Send request fail, request=%s, body=%s, retryTimes=%v, error=%+v",
						"SubscribeServiceRequest", `{"serviceName":"orders"}`, r, errorf(stack))
					calls++
				}
			}
			b.Infof("%s try to re connect to a new server", "8f3c") // below Warn
			calls++
			time.Sleep(time.Second)
		}
		n := logs.Len()
		t.Logf("10-minute outage: %d SDK calls, %d lines written", calls, n)
		if n >= 50 {
			t.Errorf("%d lines, want under 50", n)
		}
		for _, e := range logs.All() {
			if strings.Contains(e.Message, "\n") || strings.Contains(e.Message, "rpc_client.go") || e.Stack != "" {
				t.Errorf("a stack trace above Debug: %q %q", e.Message, e.Stack)
			}
		}
	})
}

type errorf string

func (e errorf) Error() string { return string(e) }

// Stack traces stay at Debug: cut from the message above it, kept at it.
func TestStackTracesKeptToDebug(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	// A logger that would attach zap stack traces from Debug up.
	l := zap.New(core, zap.AddStacktrace(zapcore.DebugLevel))
	b := mustNew(t, l, nacoslog.WithLevel(zapcore.DebugLevel), nacoslog.WithInterval(0))
	msg := "redo subscribe service:orders faild:boom\ngithub.com/x.f\n\t/x/f.go:1\ngithub.com/x.g\n\t/x/g.go:2"
	b.Warn(msg)
	b.Debug(msg)
	got := logs.TakeAll()
	if got[0].Message != "redo subscribe service:orders faild:boom" || got[0].Stack != "" {
		t.Errorf("Warn line = %q, stack %q; want the first line, no stack", got[0].Message, got[0].Stack)
	}
	if got[1].Message != msg || got[1].Stack == "" {
		t.Errorf("Debug line = %q, stack %q; want the whole message and the logger's stack", got[1].Message, got[1].Stack)
	}
}

// A real SDK call that logs its request parameters (http_agent.Request
// prints them as JSON when the request fails): the login password never
// reaches the output, nor does a ClientConfig printed as the SDK prints
// structs (%+v).
func TestSDKMessagesNeverCarryCredentials(t *testing.T) {
	keepNacosLogger(t)
	var buf bytes.Buffer
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	l := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel))
	install(t, l, zapcore.DebugLevel)

	// Port 1 on loopback: connection refused, at once.
	agent := &http_agent.HttpAgent{}
	agent.RequestOnlyResult(http.MethodPost, "http://nacos:"+secret+"@127.0.0.1:1/nacos/v1/auth/users/login",
		http.Header{}, 500, map[string]string{"username": "nacos", "password": secret})

	cfg := constant.ClientConfig{Username: "nacos", Password: secret, AccessKey: "AKID", SecretKey: secret, TimeoutMs: 5000}
	nacoslogger.Infof("client config %+v", cfg)
	nacoslogger.Errorf("login has error %+v", fmt.Errorf("Post %q: refused", "https://nacos:"+secret+"@nacos.example/v1"))

	out := buf.String()
	if strings.Count(out, "\n") != 3 {
		t.Fatalf("want 3 lines, got:\n%s", out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "AKID") {
		t.Errorf("a credential reached the output:\n%s", out)
	}
	if !strings.Contains(out, `\"password\":\"[REDACTED]\"`) || !strings.Contains(out, "Password:[REDACTED]") {
		t.Errorf("redaction markers missing:\n%s", out)
	}
}
