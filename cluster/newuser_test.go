package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

func TestWaitReadyNilContext(t *testing.T) {
	d, err := NewRegistryDirectory(func(subscriber.Instance) (Invoker, error) { return nil, errors.New("unused") })
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	//lint:ignore SA1012 the test checks that a nil ctx is rejected with an error
	err = d.WaitReady(nil)
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "cluster.RegistryDirectory.WaitReady: ctx") {
		t.Fatalf("WaitReady(nil) = %v, want an *ArgumentError naming ctx", err)
	}
}
