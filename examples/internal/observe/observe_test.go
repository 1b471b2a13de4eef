package observe_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/examples/internal/observe"
	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// Both pages serve, on loopback, with a real Manager's metrics.
func TestServe(t *testing.T) {
	o, err := observe.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := subscribertest.New()
	m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Subscribe(t.Context(), subscriber.Key{Service: "orders"}, func([]subscriber.Instance) {}); err != nil {
		t.Fatal(err)
	}
	r, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithMeterProvider(o.MeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Do(t.Context(), func(context.Context) error { return nil })

	var out strings.Builder
	if err := o.Serve("127.0.0.1:0", &out, statusz.WithSubscriptions("demo", m)); err != nil {
		t.Fatal(err)
	}
	status, metrics := o.URLs()
	if !strings.Contains(out.String(), status) || !strings.Contains(out.String(), metrics) {
		t.Errorf("printed %q, want both URLs", out.String())
	}
	if page := fetch(t, status); !strings.Contains(page, "Subscriptions: demo") {
		t.Errorf("status page: %s", page)
	}
	text := fetch(t, metrics)
	if !strings.Contains(text, `outcome="success"} 1`) {
		t.Errorf("metrics lack rebound_retry_attempts_total:\n%s", text)
	}
	if strings.Contains(text, "go_goroutines") {
		t.Error("the exporter's registry has the global collectors")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
