package subscriber_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// An adapter's error may name its endpoint with credentials (etcd's
// "http://root:pw@host:2379"): the Manager's own lines must not print it.
func TestManagerLogsNoCredentials(t *testing.T) {
	const pw = "hunter2"
	reg := subscribertest.New()
	defer reg.Close()
	reg.SetFailure(func(subscriber.Key) error {
		return rebound.Permanent(errors.New(`dial "http://root:` + pw + `@10.0.0.1:2379": permission denied`))
	})
	core, logs := observer.New(zapcore.DebugLevel)
	m, err := subscriber.New(reg, subscriber.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, func([]subscriber.Instance) {})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range logs.All() {
		line := e.Message
		for k, v := range e.ContextMap() {
			line += " " + k + "=" + fmtValue(v)
		}
		if strings.Contains(line, pw) {
			t.Errorf("the password reached the log: %s", line)
		}
	}
}

func fmtValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
}
