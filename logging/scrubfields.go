package logging

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// scrubFields returns fields with credentials scrubbed. It copies fields
// only if one changes; a field of a kind that carries no text costs a
// type switch.
func scrubFields(fields []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i := range fields {
		nf, changed := scrubField(fields[i])
		if !changed {
			continue
		}
		if out == nil {
			out = make([]zapcore.Field, len(fields))
			copy(out, fields)
		}
		out[i] = nf
	}
	if out == nil {
		return fields
	}
	return out
}

// scrubField returns f scrubbed and whether it changed.
func scrubField(f zapcore.Field) (zapcore.Field, bool) {
	switch f.Type {
	case zapcore.StringType:
		return scrubText(f, f.String)
	case zapcore.ByteStringType:
		b, _ := f.Interface.([]byte)
		return scrubText(f, string(b))
	case zapcore.ErrorType:
		err, ok := f.Interface.(error)
		if !ok || err == nil {
			return f, false
		}
		return scrubText(f, err.Error())
	case zapcore.StringerType:
		s, ok := stringOf(f.Interface)
		if !ok {
			return f, false // zap writes the panic
		}
		return scrubText(f, s)
	case zapcore.ArrayMarshalerType, zapcore.ObjectMarshalerType, zapcore.ReflectType:
		if isSensitiveKey(f.Key) {
			return zap.String(f.Key, redactedValue), true
		}
	}
	switch f.Type {
	case zapcore.ArrayMarshalerType:
		if m, ok := f.Interface.(zapcore.ArrayMarshaler); ok {
			return zap.Array(f.Key, scrubArray{m}), true
		}
	case zapcore.ObjectMarshalerType:
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			return zap.Object(f.Key, scrubObject{m}), true
		}
	case zapcore.InlineMarshalerType:
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			return zap.Inline(scrubObject{m}), true
		}
	case zapcore.ReflectType:
		if v, changed := scrubReflected(f.Interface); changed {
			return zap.Reflect(f.Key, v), true
		}
	}
	return f, false
}

// scrubText returns a string field for f's text s if s needs scrubbing or
// f's key is sensitive.
func scrubText(f zapcore.Field, s string) (zapcore.Field, bool) {
	if isSensitiveKey(f.Key) {
		return zap.String(f.Key, redactedValue), true
	}
	if red := Scrub(s); red != s || f.Type != zapcore.StringType && f.Type != zapcore.ErrorType {
		// A Stringer or byte string becomes the string it wrote, so
		// that it is not called twice; an unchanged error keeps its type.
		return zap.String(f.Key, red), true
	}
	return f, false
}

// stringOf calls v's String method; false if v is no Stringer or its
// String panics.
func stringOf(v any) (s string, ok bool) {
	st, isStringer := v.(fmt.Stringer)
	if !isStringer {
		return "", false
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return st.String(), true
}

// scrubReflected returns the JSON zap would write for v, scrubbed, if
// scrubbing changed it: as json.RawMessage if still valid JSON, else as a
// string.
func scrubReflected(v any) (any, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as zap's reflected encoder
	if err := enc.Encode(v); err != nil {
		return v, false // zap writes the error
	}
	js := string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	red := Scrub(js)
	if red == js {
		return v, false
	}
	if json.Valid([]byte(red)) {
		return json.RawMessage(red), true
	}
	return red, true
}

// scrubArray and scrubObject marshal through encoders that scrub every
// string they are given.
type (
	scrubArray  struct{ m zapcore.ArrayMarshaler }
	scrubObject struct{ m zapcore.ObjectMarshaler }
	arrayEnc    struct{ zapcore.ArrayEncoder }
	objectEnc   struct{ zapcore.ObjectEncoder }
)

func (a scrubArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	return a.m.MarshalLogArray(arrayEnc{enc})
}

func (o scrubObject) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return o.m.MarshalLogObject(objectEnc{enc})
}

func (e arrayEnc) AppendString(s string)     { e.ArrayEncoder.AppendString(Scrub(s)) }
func (e arrayEnc) AppendByteString(b []byte) { e.ArrayEncoder.AppendString(Scrub(string(b))) }
func (e arrayEnc) AppendArray(m zapcore.ArrayMarshaler) error {
	return e.ArrayEncoder.AppendArray(scrubArray{m})
}
func (e arrayEnc) AppendObject(m zapcore.ObjectMarshaler) error {
	return e.ArrayEncoder.AppendObject(scrubObject{m})
}
func (e arrayEnc) AppendReflected(v any) error {
	v, _ = scrubReflected(v)
	return e.ArrayEncoder.AppendReflected(v)
}

func (e objectEnc) AddString(k, s string) { e.ObjectEncoder.AddString(k, scrubValue(k, s)) }
func (e objectEnc) AddByteString(k string, b []byte) {
	e.ObjectEncoder.AddString(k, scrubValue(k, string(b)))
}
func (e objectEnc) AddBinary(k string, b []byte) {
	if isSensitiveKey(k) {
		e.ObjectEncoder.AddString(k, redactedValue)
		return
	}
	e.ObjectEncoder.AddBinary(k, b)
}
func (e objectEnc) AddArray(k string, m zapcore.ArrayMarshaler) error {
	if isSensitiveKey(k) {
		e.ObjectEncoder.AddString(k, redactedValue)
		return nil
	}
	return e.ObjectEncoder.AddArray(k, scrubArray{m})
}
func (e objectEnc) AddObject(k string, m zapcore.ObjectMarshaler) error {
	if isSensitiveKey(k) {
		e.ObjectEncoder.AddString(k, redactedValue)
		return nil
	}
	return e.ObjectEncoder.AddObject(k, scrubObject{m})
}
func (e objectEnc) AddReflected(k string, v any) error {
	if isSensitiveKey(k) {
		e.ObjectEncoder.AddString(k, redactedValue)
		return nil
	}
	v, _ = scrubReflected(v)
	return e.ObjectEncoder.AddReflected(k, v)
}

// scrubValue returns "[REDACTED]" for a sensitive key's s, else Scrub(s).
func scrubValue(k, s string) string {
	if isSensitiveKey(k) {
		return redactedValue
	}
	return Scrub(s)
}
