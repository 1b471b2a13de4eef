package logging

import (
	"bytes"
	"encoding/json"
	"reflect"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RedactedValue replaces the value of every sensitive field.
const RedactedValue = "[REDACTED]"

// sensitiveWords are matched against keys folded by IsSensitiveKey,
// indexed by their first byte.
var sensitiveWords = func() (t [256][]string) {
	for _, w := range []string{
		"password", "passwd", "passphrase", "pwd", "privatekey",
		"secret",                  // secret, secretKey, client_secret
		"token",                   // token, accessToken, x-auth-token
		"credential",              // credential, credentials
		"cookie",                  // cookie, set-cookie
		"accesskey",               // accessKey, access_key_id
		"apikey", "authorization", // api-key, Authorization
	} {
		t[w[0]] = append(t[w[0]], w)
	}
	return t
}()

// IsSensitiveKey reports whether a field key looks like it names a
// credential. The key is folded to lower case with every character other
// than a letter or digit removed ("X-Auth-Token" becomes "xauthtoken"), and
// matches if it contains one of: password, passwd, passphrase, pwd,
// privatekey, secret, token, credential, cookie, accesskey, apikey,
// authorization. So "password", "Password", "db_password", "secretKey",
// "accessKey", "access_key_id", "token", "accessToken", "x-auth-token",
// "credentials", "api-key" and "Authorization" match; "user", "key",
// "host" do not. The match errs on the side of redacting ("tokenTTL"
// matches too). It does not allocate for keys up to 64 bytes.
func IsSensitiveKey(key string) bool {
	if len(key) < 3 {
		return false
	}
	var arr [64]byte
	buf := arr[:0]
	if len(key) > len(arr) {
		buf = make([]byte, 0, len(key))
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c >= 0x80:
			buf = append(buf, c)
		case 'A' <= c && c <= 'Z':
			buf = append(buf, c+('a'-'A'))
		}
	}
	for i := range buf {
		for _, w := range sensitiveWords[buf[i]] {
			if len(buf)-i >= len(w) && string(buf[i:i+len(w)]) == w {
				return true
			}
		}
	}
	return false
}

// RedactCore wraps core so that every field whose key is sensitive (see
// IsSensitiveKey) is written as the string "[REDACTED]", whatever its type.
// Redaction also applies:
//
//   - inside zap.Object, zap.Dict, zap.Inline and zap.Objects values, at
//     any depth (the keys their MarshalLogObject methods add are checked);
//   - inside zap.Any/zap.Reflect values that can hold keys (maps, structs,
//     slices of them, pointers to them): such a value is converted through
//     encoding/json and its sensitive keys replaced; it is written unchanged
//     if nothing in it is sensitive or if it cannot be marshalled;
//   - to every field that follows a zap.Namespace with a sensitive key.
//
// Fields given to With on the returned core (for example through
// (*zap.Logger).With) are redacted too; fields already added to core
// before it was wrapped are not. Messages and error texts are not
// inspected.
//
// Levels, sampling and the per-core decisions of a zapcore.NewTee are those
// of core: RedactCore delegates Check to it and registers a pre-write hook
// on the entry (zapcore.CheckedEntry.Before), so if the returned core is
// itself one branch of a Tee, the other branches receive the redacted
// fields as well.
//
// The returned core is safe for concurrent use if core is. RedactCore(nil)
// returns a no-op core; wrapping a core RedactCore returned returns it
// unchanged. Fields without sensitive keys and without nested values are
// passed through without copying.
func RedactCore(core zapcore.Core) zapcore.Core {
	if core == nil {
		return zapcore.NewNopCore()
	}
	if rc, ok := core.(*redactCore); ok {
		return rc
	}
	return &redactCore{Core: core}
}

// Redacted returns l with its core wrapped by RedactCore:
// l.WithOptions(zap.WrapCore(RedactCore)). A nil l means zap.NewNop().
func Redacted(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	if _, ok := l.Core().(*redactCore); ok {
		return l
	}
	return l.WithOptions(zap.WrapCore(RedactCore))
}

type redactCore struct {
	zapcore.Core
	// secret: With added a zap.Namespace with a sensitive key, so every
	// later field is inside it and is redacted.
	secret bool
}

// Level reports the wrapped core's minimum level, for zap.Logger.Level.
func (c *redactCore) Level() zapcore.Level { return zapcore.LevelOf(c.Core) }

func (c *redactCore) With(fields []zapcore.Field) zapcore.Core {
	red, secret := redactFields(fields, c.secret)
	return &redactCore{Core: c.Core.With(red), secret: secret}
}

func (c *redactCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Core.Enabled(ent.Level) {
		return ce
	}
	out := c.Core.Check(ent, ce)
	if out == nil {
		return nil
	}
	if c.secret {
		return out.Before(ent, redactAllHook)
	}
	return out.Before(ent, redactHook)
}

// Write redacts for callers that write to the core directly (a
// CheckedEntry built by Check writes to the wrapped core's cores).
func (c *redactCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	red, _ := redactFields(fields, c.secret)
	return c.Core.Write(ent, red)
}

func redactHook(ent zapcore.Entry, fields []zapcore.Field) (zapcore.Entry, []zapcore.Field) {
	red, _ := redactFields(fields, false)
	return ent, red
}

func redactAllHook(ent zapcore.Entry, fields []zapcore.Field) (zapcore.Entry, []zapcore.Field) {
	red, _ := redactFields(fields, true)
	return ent, red
}

// redactFields returns fields with sensitive values replaced, and whether
// the fields end inside a sensitive namespace. It copies fields only if one
// changes. secret says the fields start inside a sensitive namespace.
func redactFields(fields []zapcore.Field, secret bool) ([]zapcore.Field, bool) {
	var out []zapcore.Field
	for i := range fields {
		f := &fields[i]
		nf, changed := redactField(f, secret)
		if f.Type == zapcore.NamespaceType && IsSensitiveKey(f.Key) {
			secret = true
		}
		if changed {
			if out == nil {
				out = make([]zapcore.Field, len(fields))
				copy(out, fields)
			}
			out[i] = nf
		}
	}
	if out == nil {
		return fields, secret
	}
	return out, secret
}

func redactField(f *zapcore.Field, secret bool) (zapcore.Field, bool) {
	switch f.Type {
	case zapcore.SkipType, zapcore.NamespaceType:
		return *f, false
	case zapcore.InlineMarshalerType:
		// No key of its own: its keys are checked one by one.
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			return zap.Inline(redactObject{m: m, all: secret}), true
		}
		return *f, false
	}
	if secret || IsSensitiveKey(f.Key) {
		return zap.String(f.Key, RedactedValue), true
	}
	switch f.Type {
	case zapcore.ObjectMarshalerType:
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			return zap.Object(f.Key, redactObject{m: m}), true
		}
	case zapcore.ArrayMarshalerType:
		if m, ok := f.Interface.(zapcore.ArrayMarshaler); ok {
			return zap.Array(f.Key, redactArray{m: m}), true
		}
	case zapcore.ReflectType:
		if v, ok := redactReflected(f.Interface); ok {
			return zap.Reflect(f.Key, v), true
		}
	}
	return *f, false
}

// redactObject marshals m through an encoder that redacts sensitive keys
// (every key, if all).
type redactObject struct {
	m   zapcore.ObjectMarshaler
	all bool
}

func (o redactObject) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return o.m.MarshalLogObject(&redactEncoder{ObjectEncoder: enc, all: o.all})
}

type redactArray struct{ m zapcore.ArrayMarshaler }

func (a redactArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	return a.m.MarshalLogArray(redactArrayEncoder{ArrayEncoder: enc})
}

// redactArrayEncoder redacts inside the objects, arrays and reflected
// values of an array; array elements have no keys of their own.
type redactArrayEncoder struct{ zapcore.ArrayEncoder }

func (e redactArrayEncoder) AppendObject(m zapcore.ObjectMarshaler) error {
	return e.ArrayEncoder.AppendObject(redactObject{m: m})
}

func (e redactArrayEncoder) AppendArray(m zapcore.ArrayMarshaler) error {
	return e.ArrayEncoder.AppendArray(redactArray{m: m})
}

func (e redactArrayEncoder) AppendReflected(v any) error {
	if rv, ok := redactReflected(v); ok {
		v = rv
	}
	return e.ArrayEncoder.AppendReflected(v)
}

// redactEncoder is the ObjectEncoder seen by nested marshalers. all is set
// when every key is redacted (the object is inside a sensitive namespace,
// or it opened one).
type redactEncoder struct {
	zapcore.ObjectEncoder
	all bool
}

func (e *redactEncoder) hide(key string) bool {
	if e.all || IsSensitiveKey(key) {
		e.ObjectEncoder.AddString(key, RedactedValue)
		return true
	}
	return false
}

func (e *redactEncoder) AddArray(key string, m zapcore.ArrayMarshaler) error {
	if e.hide(key) {
		return nil
	}
	return e.ObjectEncoder.AddArray(key, redactArray{m: m})
}

func (e *redactEncoder) AddObject(key string, m zapcore.ObjectMarshaler) error {
	if e.hide(key) {
		return nil
	}
	return e.ObjectEncoder.AddObject(key, redactObject{m: m})
}

func (e *redactEncoder) AddReflected(key string, v any) error {
	if e.hide(key) {
		return nil
	}
	if rv, ok := redactReflected(v); ok {
		v = rv
	}
	return e.ObjectEncoder.AddReflected(key, v)
}

func (e *redactEncoder) OpenNamespace(key string) {
	e.ObjectEncoder.OpenNamespace(key)
	if IsSensitiveKey(key) {
		e.all = true
	}
}

func (e *redactEncoder) AddBinary(k string, v []byte) {
	if !e.hide(k) {
		e.ObjectEncoder.AddBinary(k, v)
	}
}

func (e *redactEncoder) AddByteString(k string, v []byte) {
	if !e.hide(k) {
		e.ObjectEncoder.AddByteString(k, v)
	}
}

func (e *redactEncoder) AddBool(k string, v bool) {
	if !e.hide(k) {
		e.ObjectEncoder.AddBool(k, v)
	}
}

func (e *redactEncoder) AddComplex128(k string, v complex128) {
	if !e.hide(k) {
		e.ObjectEncoder.AddComplex128(k, v)
	}
}

func (e *redactEncoder) AddComplex64(k string, v complex64) {
	if !e.hide(k) {
		e.ObjectEncoder.AddComplex64(k, v)
	}
}

func (e *redactEncoder) AddDuration(k string, v time.Duration) {
	if !e.hide(k) {
		e.ObjectEncoder.AddDuration(k, v)
	}
}

func (e *redactEncoder) AddFloat64(k string, v float64) {
	if !e.hide(k) {
		e.ObjectEncoder.AddFloat64(k, v)
	}
}

func (e *redactEncoder) AddFloat32(k string, v float32) {
	if !e.hide(k) {
		e.ObjectEncoder.AddFloat32(k, v)
	}
}

func (e *redactEncoder) AddInt(k string, v int) {
	if !e.hide(k) {
		e.ObjectEncoder.AddInt(k, v)
	}
}

func (e *redactEncoder) AddInt64(k string, v int64) {
	if !e.hide(k) {
		e.ObjectEncoder.AddInt64(k, v)
	}
}

func (e *redactEncoder) AddInt32(k string, v int32) {
	if !e.hide(k) {
		e.ObjectEncoder.AddInt32(k, v)
	}
}

func (e *redactEncoder) AddInt16(k string, v int16) {
	if !e.hide(k) {
		e.ObjectEncoder.AddInt16(k, v)
	}
}

func (e *redactEncoder) AddInt8(k string, v int8) {
	if !e.hide(k) {
		e.ObjectEncoder.AddInt8(k, v)
	}
}

func (e *redactEncoder) AddString(k, v string) {
	if !e.hide(k) {
		e.ObjectEncoder.AddString(k, v)
	}
}

func (e *redactEncoder) AddTime(k string, v time.Time) {
	if !e.hide(k) {
		e.ObjectEncoder.AddTime(k, v)
	}
}

func (e *redactEncoder) AddUint(k string, v uint) {
	if !e.hide(k) {
		e.ObjectEncoder.AddUint(k, v)
	}
}

func (e *redactEncoder) AddUint64(k string, v uint64) {
	if !e.hide(k) {
		e.ObjectEncoder.AddUint64(k, v)
	}
}

func (e *redactEncoder) AddUint32(k string, v uint32) {
	if !e.hide(k) {
		e.ObjectEncoder.AddUint32(k, v)
	}
}

func (e *redactEncoder) AddUint16(k string, v uint16) {
	if !e.hide(k) {
		e.ObjectEncoder.AddUint16(k, v)
	}
}

func (e *redactEncoder) AddUint8(k string, v uint8) {
	if !e.hide(k) {
		e.ObjectEncoder.AddUint8(k, v)
	}
}

func (e *redactEncoder) AddUintptr(k string, v uintptr) {
	if !e.hide(k) {
		e.ObjectEncoder.AddUintptr(k, v)
	}
}

// redactReflected returns a redacted copy of v and true if v holds a
// sensitive key; otherwise v and false. Values that cannot hold keys are
// returned at once; others go through encoding/json (the encoding zap uses
// for reflected values by default).
func redactReflected(v any) (any, bool) {
	if v == nil || !mayHoldKeys(reflect.TypeOf(v)) {
		return v, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v, false // zap reports the same error when it encodes v
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return v, false
	}
	if !redactGeneric(g) {
		return v, false
	}
	return g, true
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

func mayHoldKeys(t reflect.Type) bool {
	if t.Implements(jsonMarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.Map, reflect.Struct, reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return mayHoldKeys(t.Elem())
	}
	return false
}

// redactGeneric redacts a decoded JSON value in place and reports whether
// it changed anything.
func redactGeneric(g any) bool {
	changed := false
	switch g := g.(type) {
	case map[string]any:
		for k, v := range g {
			if IsSensitiveKey(k) {
				g[k] = RedactedValue
				changed = true
			} else if redactGeneric(v) {
				changed = true
			}
		}
	case []any:
		for _, v := range g {
			if redactGeneric(v) {
				changed = true
			}
		}
	}
	return changed
}
