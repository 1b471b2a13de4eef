package reboundgrpc_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
)

// A filter that panics with the endpoint it choked on: the Builder's
// "recovered a panic" line must not print the endpoint's password.
func TestBuilderLogsNoCredentials(t *testing.T) {
	const pw = "hunter2"
	synctest.Test(t, func(t *testing.T) {
		keep := func(in subscriber.Instance) bool {
			if in.Port == 666 {
				panic("bad endpoint grpc://svc:" + pw + "@10.0.0.1:666")
			}
			return true
		}
		core, logs := observer.New(zapcore.DebugLevel)
		reg, _, b := memEnvWith(t, nil, reboundgrpc.WithFilter(keep), reboundgrpc.WithLogger(zap.New(core)))
		reg.Set(orders, inst(1))
		r, err := b.Build(mustTarget(t, "rebound:///orders"), newFakeCC(), resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		reg.Set(orders, inst(1), inst(666))
		synctest.Wait()
		if logs.FilterMessageSnippet("panic").Len() == 0 {
			t.Fatal("no line about the panic")
		}
		for _, e := range logs.All() {
			line := e.Message
			for k, v := range e.ContextMap() {
				if s, ok := v.(string); ok {
					line += " " + k + "=" + s
				}
			}
			if strings.Contains(line, pw) {
				t.Errorf("the password reached the log: %.200s", line)
			}
		}
	})
}
