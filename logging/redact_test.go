package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
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

type stringer string

func (s stringer) String() string { return string(s) }

// Every key form is redacted, whatever the field type; other fields pass.
func TestRedactedKeyForms(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Redacted(zap.New(core))

	keys := []string{"password", "Password", "secretKey", "accessKey", "token", "x-auth-token", "X-Auth-Token", "credential", "accessToken"}
	for _, k := range keys {
		l.Info("login", zap.String(k, secret), zap.String("user", "nacos"))
	}
	for i, e := range logs.TakeAll() {
		want := map[string]any{keys[i]: logging.RedactedValue, "user": "nacos"}
		if cm := e.ContextMap(); !reflect.DeepEqual(cm, want) {
			t.Errorf("key %q: fields = %v, want %v", keys[i], cm, want)
		}
	}

	l.Warn("types",
		zap.Int("token", 42),
		zap.Stringer("password", stringer(secret)),
		zap.ByteString("secret", []byte(secret)),
		zap.Binary("privateKey", []byte(secret)),
		zap.NamedError("credentials", errors.New(secret)),
		zap.Strings("apiKeys", []string{secret}),
		zap.Duration("tokenTTL", time.Hour),
		zap.Skip(),
		zap.String("host", "127.0.0.1"),
		zap.Int("port", 8848),
		zap.Duration("delay", time.Second),
		zap.Strings("servers", []string{"a", "b"}),
	)
	want := map[string]any{
		"token": logging.RedactedValue, "password": logging.RedactedValue, "secret": logging.RedactedValue,
		"privateKey": logging.RedactedValue, "credentials": logging.RedactedValue, "apiKeys": logging.RedactedValue,
		"tokenTTL": logging.RedactedValue,
		"host":     "127.0.0.1", "port": int64(8848), "delay": time.Second, "servers": []any{"a", "b"},
	}
	if cm := logs.TakeAll()[0].ContextMap(); !reflect.DeepEqual(cm, want) {
		t.Errorf("fields =\n  %#v\nwant\n  %#v", cm, want)
	}
}

// The caller's field slice is never modified.
func TestRedactedDoesNotModifyCallerFields(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Redacted(zap.New(core))
	fs := []zap.Field{zap.String("token", secret), zap.String("user", "u")}
	l.Info("m", fs...)
	if fs[0].String != secret {
		t.Errorf("caller's field was modified: %v", fs[0])
	}
	if got := logs.All()[0].ContextMap()["token"]; got != logging.RedactedValue {
		t.Errorf("token = %v, want redacted", got)
	}
}

type credentials struct {
	User      string `json:"user"`
	Password  string `json:"password"`
	AccessKey string
}

type loginObject struct {
	user, password string
	nested         *loginObject
}

func (o loginObject) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("user", o.user)
	enc.AddString("password", o.password)
	enc.AddInt("tokenCount", 3)
	if err := enc.AddReflected("headers", map[string]string{"X-Auth-Token": o.password, "Accept": "json"}); err != nil {
		return err
	}
	if o.nested != nil {
		if err := enc.AddObject("nested", o.nested); err != nil {
			return err
		}
	}
	enc.OpenNamespace("secrets")
	enc.AddString("anything", o.password)
	return nil
}

func TestRedactedNested(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Redacted(zap.New(core))

	obj := loginObject{user: "nacos", password: secret, nested: &loginObject{user: "inner", password: secret}}
	plainMap := map[string]string{"Accept": "json"}
	l.Info("nested",
		zap.Object("login", obj),
		zap.Dict("db", zap.String("host", "db1"), zap.String("password", secret), zap.Dict("tls", zap.String("privateKey", secret))),
		zap.Objects("logins", []loginObject{{user: "a", password: secret}}),
		zap.Inline(zapcore.ObjectMarshalerFunc(func(enc zapcore.ObjectEncoder) error {
			enc.AddString("inlineToken", secret)
			enc.AddString("inlineUser", "u")
			return nil
		})),
		zap.Any("params", map[string]any{
			"serviceName": "orders",
			"accessToken": secret,
			"meta":        map[string]any{"secretKey": secret, "zone": "a"},
			"list":        []any{map[string]any{"password": secret, "n": 1}},
		}),
		zap.Any("creds", credentials{User: "nacos", Password: secret, AccessKey: secret}),
		zap.Any("credPtrs", []*credentials{{User: "x", Password: secret}}),
		zap.Any("plain", plainMap),
		zap.Any("nums", []int{1, 2}),
	)

	redactedHeaders := map[string]any{"Accept": "json", "X-Auth-Token": logging.RedactedValue}
	innerLogin := map[string]any{
		"user": "inner", "password": logging.RedactedValue, "tokenCount": logging.RedactedValue,
		"headers": redactedHeaders, "secrets": map[string]any{"anything": logging.RedactedValue},
	}
	want := map[string]any{
		"login": map[string]any{
			"user": "nacos", "password": logging.RedactedValue, "tokenCount": logging.RedactedValue,
			"headers": redactedHeaders, "nested": innerLogin,
			"secrets": map[string]any{"anything": logging.RedactedValue},
		},
		"db": map[string]any{"host": "db1", "password": logging.RedactedValue, "tls": map[string]any{"privateKey": logging.RedactedValue}},
		"logins": []any{map[string]any{
			"user": "a", "password": logging.RedactedValue, "tokenCount": logging.RedactedValue,
			"headers": redactedHeaders, "secrets": map[string]any{"anything": logging.RedactedValue},
		}},
		"inlineToken": logging.RedactedValue,
		"inlineUser":  "u",
		"params": map[string]any{
			"serviceName": "orders", "accessToken": logging.RedactedValue,
			"meta": map[string]any{"secretKey": logging.RedactedValue, "zone": "a"},
			"list": []any{map[string]any{"password": logging.RedactedValue, "n": json.Number("1")}},
		},
		"creds":    map[string]any{"user": "nacos", "password": logging.RedactedValue, "AccessKey": logging.RedactedValue},
		"credPtrs": []any{map[string]any{"user": "x", "password": logging.RedactedValue, "AccessKey": logging.RedactedValue}},
		"plain":    plainMap, // nothing sensitive: the original value, type and all
		"nums":     []any{1, 2},
	}
	got := logs.TakeAll()[0].ContextMap()
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s =\n  %#v\nwant\n  %#v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got fields %v, want %d of them", got, len(want))
	}
}

func TestRedactedNamespaceAndWith(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Redacted(zap.New(core))

	l.Info("ns", zap.String("user", "u"), zap.Namespace("credentials"), zap.String("name", "n"), zap.Int("id", 1))
	want := map[string]any{"user": "u", "credentials": map[string]any{"name": logging.RedactedValue, "id": logging.RedactedValue}}
	if cm := logs.TakeAll()[0].ContextMap(); !reflect.DeepEqual(cm, want) {
		t.Errorf("fields = %#v, want %#v", cm, want)
	}

	// With: redacted once, at With; a sensitive namespace opened by With
	// covers every later field.
	wl := l.With(zap.String("accessKey", secret), zap.String("namespaceId", "public"))
	wl.Info("with", zap.String("secretKey", secret), zap.String("group", "g"))
	want = map[string]any{"accessKey": logging.RedactedValue, "namespaceId": "public", "secretKey": logging.RedactedValue, "group": "g"}
	if cm := logs.TakeAll()[0].ContextMap(); !reflect.DeepEqual(cm, want) {
		t.Errorf("fields = %#v, want %#v", cm, want)
	}
	nl := l.With(zap.Namespace("auth_token")).With(zap.String("a", "1"))
	nl.Info("ns with", zap.String("b", "2"))
	want = map[string]any{"auth_token": map[string]any{"a": logging.RedactedValue, "b": logging.RedactedValue}}
	if cm := logs.TakeAll()[0].ContextMap(); !reflect.DeepEqual(cm, want) {
		t.Errorf("fields = %#v, want %#v", cm, want)
	}
}

// End to end through zap's real JSON encoder: the secret appears nowhere
// in the output, and the normal fields are intact.
func TestRedactedJSONOutput(t *testing.T) {
	var buf bytes.Buffer
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	l := logging.Redacted(zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel)))
	l = l.With(zap.String("password", secret), zap.String("component", "nacos"))
	l.Info("connect",
		zap.String("X-Auth-Token", secret),
		zap.Object("login", loginObject{user: "nacos", password: secret}),
		zap.Any("params", map[string]any{"accessToken": secret, "serviceName": "orders"}),
		zap.Any("creds", &credentials{User: "nacos", Password: secret, AccessKey: secret}),
		zap.Namespace("secret"), zap.String("x", secret),
	)
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Fatalf("output contains the secret: %s", out)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("output is not JSON: %v: %s", err, out)
	}
	if m["component"] != "nacos" || m["msg"] != "connect" || m["password"] != logging.RedactedValue ||
		m["X-Auth-Token"] != logging.RedactedValue {
		t.Errorf("unexpected output: %s", out)
	}
	if p := m["params"].(map[string]any); p["serviceName"] != "orders" || p["accessToken"] != logging.RedactedValue {
		t.Errorf("params = %v", p)
	}
	if n := strings.Count(out, logging.RedactedValue); n != 10 {
		t.Errorf("%d redactions, want 10: %s", n, out)
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

// everyType adds one value of every ObjectEncoder type under key+suffix.
type everyType struct{ key string }

func (o everyType) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	k := o.key
	enc.AddBinary(k+"Binary", []byte("b"))
	enc.AddByteString(k+"ByteString", []byte("bs"))
	enc.AddBool(k+"Bool", true)
	enc.AddComplex128(k+"Complex128", 1)
	enc.AddComplex64(k+"Complex64", 1)
	enc.AddDuration(k+"Duration", time.Second)
	enc.AddFloat64(k+"Float64", 1.5)
	enc.AddFloat32(k+"Float32", 1.5)
	enc.AddInt(k+"Int", 1)
	enc.AddInt64(k+"Int64", 1)
	enc.AddInt32(k+"Int32", 1)
	enc.AddInt16(k+"Int16", 1)
	enc.AddInt8(k+"Int8", 1)
	enc.AddString(k+"String", "s")
	enc.AddTime(k+"Time", time.Unix(0, 0).UTC())
	enc.AddUint(k+"Uint", 1)
	enc.AddUint64(k+"Uint64", 1)
	enc.AddUint32(k+"Uint32", 1)
	enc.AddUint16(k+"Uint16", 1)
	enc.AddUint8(k+"Uint8", 1)
	enc.AddUintptr(k+"Uintptr", 1)
	if err := enc.AddArray(k+"Array", zapcore.ArrayMarshalerFunc(func(ae zapcore.ArrayEncoder) error {
		if err := ae.AppendObject(zapcore.ObjectMarshalerFunc(func(oe zapcore.ObjectEncoder) error {
			oe.AddString("secret", "s")
			return nil
		})); err != nil {
			return err
		}
		if err := ae.AppendArray(zapcore.ArrayMarshalerFunc(func(ae zapcore.ArrayEncoder) error {
			return ae.AppendReflected(map[string]string{"password": "p", "n": "1"})
		})); err != nil {
			return err
		}
		ae.AppendString("plain")
		return nil
	})); err != nil {
		return err
	}
	return enc.AddObject(k+"Object", zapcore.ObjectMarshalerFunc(func(oe zapcore.ObjectEncoder) error {
		oe.AddString("user", "u")
		return nil
	}))
}

func TestRedactedEveryEncoderMethod(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logging.Redacted(zap.New(core))
	l.Info("all types", zap.Object("normal", everyType{key: "k"}), zap.Object("sensitive", everyType{key: "token"}))
	cm := logs.All()[0].ContextMap()
	normal, sensitive := cm["normal"].(map[string]any), cm["sensitive"].(map[string]any)
	if len(normal) != 23 || len(sensitive) != 23 {
		t.Fatalf("got %d and %d keys, want 23: %v", len(normal), len(sensitive), cm)
	}
	for k, v := range sensitive {
		if v != logging.RedactedValue {
			t.Errorf("sensitive.%s = %#v, want redacted", k, v)
		}
	}
	for k, v := range normal {
		if v == logging.RedactedValue {
			t.Errorf("normal.%s redacted", k)
		}
	}
	wantArray := []any{
		map[string]any{"secret": logging.RedactedValue},
		[]any{map[string]any{"password": logging.RedactedValue, "n": "1"}},
		"plain",
	}
	if !reflect.DeepEqual(normal["kArray"], wantArray) {
		t.Errorf("kArray = %#v, want %#v", normal["kArray"], wantArray)
	}
	if !reflect.DeepEqual(normal["kObject"], map[string]any{"user": "u"}) || normal["kInt"] != 1 || normal["kString"] != "s" {
		t.Errorf("normal values changed: %v", normal)
	}
}
