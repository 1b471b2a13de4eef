package nacos

import (
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// WithPolicy's observers and meter are the registration's, and
// stay among the Retrier's options with the gates (the observers see the
// repairs' engine events as well).
func TestRegisterPolicyObservers(t *testing.T) {
	obs := rebound.ObserverFunc(func(rebound.Event) {})
	mp := noop.NewMeterProvider()
	var c regConfig
	WithPolicy(rebound.Policy{}, rebound.WithObserver(obs), rebound.WithLimiter(rate.NewLimiter(1, 1))).applyRegister(&c)
	WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(mp), rebound.WithObserver(obs)).applyRegister(&c)
	if len(c.errs) > 0 || len(c.obs) != 2 || c.meter != mp || len(c.retryOpts) != 4 {
		t.Fatalf("%d observers, meter %v, %d Retrier options, errors %v; want 2, mp, 4, none", len(c.obs), c.meter, len(c.retryOpts), c.errs)
	}
	if s := admit.Engine(c.retryOpts); len(s.Observers) != 2 || s.MeterProvider != mp {
		t.Fatalf("the Retrier's options hold %d observers and meter %v; want 2 and mp", len(s.Observers), s.MeterProvider)
	}
}
