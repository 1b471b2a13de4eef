package logging_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound/logging"
)

const credURL = "grpc://user:" + secret + "@10.0.0.1:9000"

type target struct{ url string }

func (t target) String() string { return t.url }

type endpoints []string

func (e endpoints) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, s := range e {
		enc.AppendString(s)
	}
	return nil
}

type conf struct {
	Endpoint string
	Nested   map[string]string
}

func (c conf) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("endpoint", c.Endpoint)
	enc.AddString("password", "plain-"+secret)
	return enc.AddArray("more", endpoints{c.Endpoint})
}

// Every kind of field that can carry text: none may write the password,
// whatever encoder (JSON and console) writes it.
func TestRedactedScrubsEveryFieldKind(t *testing.T) {
	fields := map[string]zap.Field{
		"Stringer":          zap.Stringer("target", target{credURL}),
		"Strings":           zap.Strings("endpoints", []string{"10.0.0.2:9000", credURL}),
		"Array":             zap.Array("endpoints", endpoints{credURL}),
		"AnyStrings":        zap.Any("endpoints", []string{credURL}),
		"AnyStruct":         zap.Any("config", conf{Endpoint: credURL}),
		"AnyMap":            zap.Any("config", map[string]string{"endpoint": credURL}),
		"AnyMapSensitive":   zap.Any("config", map[string]string{"password": secret}),
		"Object":            zap.Object("config", conf{Endpoint: "http://h"}),
		"Inline":            zap.Inline(conf{Endpoint: credURL}),
		"ByteString":        zap.ByteString("endpoint", []byte(credURL)),
		"Stringers":         zap.Stringers("targets", []target{{credURL}}),
		"Error":             zap.Error(errors.New(`dial "` + credURL + `": refused`)),
		"AnyError":          zap.Any("cause", errors.New(`dial "`+credURL+`": refused`)),
		"SensitiveStringer": zap.Stringer("accessToken", target{secret}),
	}
	for name, f := range fields {
		for _, enc := range []zapcore.Encoder{
			zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
			zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		} {
			var buf bytes.Buffer
			l := logging.Redacted(zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel)))
			l.Info("resolve", f)
			l.With(f).Info("with")
			if out := buf.String(); strings.Contains(out, secret) {
				t.Errorf("%s: the password reached the log:\n%s", name, out)
			}
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
