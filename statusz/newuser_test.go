package statusz_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
)

// A nil *subscriber.Manager or *failback.Invoker in an interface is not
// == nil; New used to accept it and the first request panicked.
func TestNewRejectsNilPointerSources(t *testing.T) {
	var m *subscriber.Manager
	var fb *failback.Invoker
	for _, tc := range []struct {
		opt  statusz.Option
		want string
	}{
		{statusz.WithSubscriptions("nacos", m), "statusz.WithSubscriptions: src must not be nil"},
		{statusz.WithFailback("notify", fb), "statusz.WithFailback: src must not be nil"},
	} {
		_, err := statusz.New(tc.opt)
		if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v, want an *ArgumentError containing %q", err, tc.want)
		}
	}
}
