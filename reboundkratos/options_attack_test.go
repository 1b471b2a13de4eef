package reboundkratos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestOneOptionTypeMisplacedOptionNamed: NewDiscovery and NewRegistrar
// share the package's one Option type (rebound's doc.go and
// docs/design.md: one Option type per package), so an option of one given
// to the other compiles; it is then an *rebound.ArgumentError naming the
// option, for every option of either constructor.
func TestOneOptionTypeMisplacedOptionNamed(t *testing.T) {
	discoveryOnly := map[string]reboundkratos.Option{
		"WithKind":       reboundkratos.WithKind("http"),
		"WithMaxPending": reboundkratos.WithMaxPending(1),
		"WithKeyFunc": reboundkratos.WithKeyFunc(func(name string) (subscriber.Key, error) {
			return subscriber.Key{Service: name}, nil
		}),
	}
	registrarOnly := map[string]reboundkratos.Option{
		"WithCluster":    reboundkratos.WithCluster("C"),
		"WithWeight":     reboundkratos.WithWeight(1),
		"WithDrainDelay": reboundkratos.WithDrainDelay(time.Second),
		"WithPolicy":     reboundkratos.WithPolicy(rebound.Policy{}),
	}
	named := func(ctor, name string, err error) {
		t.Helper()
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s(%s): %v; want an *ArgumentError naming %s", ctor, name, err, name)
		}
	}
	m, err := subscriber.New(subscribertest.New())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for name, o := range registrarOnly {
		d, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos, o)
		if d != nil {
			_ = d.Close()
		}
		named("NewDiscovery", name, err)
	}
	register := func(context.Context, subscriber.Key, subscriber.Instance) (subscriber.Registration, error) {
		return nil, errors.New("not called")
	}
	for name, o := range discoveryOnly {
		r, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, register, o)
		if r != nil {
			_ = r.Close()
		}
		named("NewRegistrar", name, err)
	}
}
