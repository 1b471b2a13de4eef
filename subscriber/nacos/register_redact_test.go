package nacos_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestRegistrationLogsScrubCredentials: a server whose answers name an
// endpoint with a user and password (a failed check's error here)
// reaches the Registration's log lines without the password.
func TestRegistrationLogsScrubCredentials(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	core, logs := observer.New(zapcore.DebugLevel)
	mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080),
		append(fastRegister, nacos.WithCheckInterval(200*time.Millisecond), nacos.WithLogger(zap.New(core)))...)
	srv.SetErrorMessage("forwarded to http://nacos:s3cret@10.0.0.5:8848 and refused")
	if err := srv.SetRequestError(nacostest.RequestServiceQuery, 500); err != nil {
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "a failed check logged", func() bool {
		return logs.FilterMessageSnippet("repair failed").Len() > 0
	})
	named := false
	for _, e := range logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, "s3cret") {
			t.Errorf("a log line carries the password: %s", line)
		}
		named = named || strings.Contains(line, "//nacos:")
	}
	if !named {
		t.Fatalf("no line names the endpoint's user (the rejection's message); lines: %v", logs.All())
	}
}
