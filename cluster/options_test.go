package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// TestOptionForTheOtherConstructor: an option of one directory given to
// the other is an argument error naming it; WithLogger serves both.
func TestOptionForTheOtherConstructor(t *testing.T) {
	dial := func(subscriber.Instance) (Invoker, error) { return nil, errors.New("no") }
	_, err := NewRegistryDirectory(dial, WithMaxOpenTimeout(time.Second))
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithMaxOpenTimeout") {
		t.Fatalf("NewRegistryDirectory(WithMaxOpenTimeout): %v, want an argument error naming it", err)
	}
	_, err = NewBreakerDirectory(NewStaticDirectory(), WithFilter(nil))
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithFilter") {
		t.Fatalf("NewBreakerDirectory(WithFilter): %v, want an argument error naming it", err)
	}
	if _, err := NewRegistryDirectory(dial, WithLogger(nil)); err != nil {
		t.Fatal(err)
	}
	bd, err := NewBreakerDirectory(NewStaticDirectory(), WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = bd.Close()
}
