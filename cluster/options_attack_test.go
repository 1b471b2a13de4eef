package cluster_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/subscriber"
)

// TestOneOptionTypeMisplacedOptionNamed: the package has one Option type for
// both directories (rebound's doc.go and docs/design.md: one Option type
// per package), so an option of one directory given to the other
// compiles; it is then an *rebound.ArgumentError naming the option, for
// every option of either directory.
func TestOneOptionTypeMisplacedOptionNamed(t *testing.T) {
	registryOnly := map[string]cluster.Option{
		"WithFilter":       cluster.WithFilter(func(subscriber.Instance) bool { return true }),
		"WithErrorHandler": cluster.WithErrorHandler(func(error) {}),
		"WithView":         cluster.WithView(nil),
	}
	breakerOnly := map[string]cluster.Option{
		"WithBreakerSettings": cluster.WithBreakerSettings(func(string) gobreaker.Settings { return gobreaker.Settings{} }, rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {}))),
		"WithMaxEjected":      cluster.WithMaxEjected(0.5),
		"WithMaxOpenTimeout":  cluster.WithMaxOpenTimeout(time.Minute),
	}
	named := func(ctor, name string, err error) {
		t.Helper()
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), "cluster."+name) {
			t.Errorf("%s(%s): %v; want an *ArgumentError naming cluster.%s", ctor, name, err, name)
		}
	}
	for name, o := range breakerOnly {
		d, err := cluster.NewRegistryDirectory(dialAddr, o)
		if d != nil {
			_ = d.Close()
		}
		named("NewRegistryDirectory", name, err)
	}
	for name, o := range registryOnly {
		d, err := cluster.NewBreakerDirectory(cluster.NewStaticDirectory(), o)
		if d != nil {
			_ = d.Close()
		}
		named("NewBreakerDirectory", name, err)
	}
}
