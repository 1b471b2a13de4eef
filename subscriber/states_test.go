package subscriber_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/subscriber"
)

// StatePending through StateStopped is every State String knows by name,
// in value order: the values from 1 up to the first that String prints as
// "State(n)".
func TestStatesCoversEveryState(t *testing.T) {
	var want []subscriber.State
	for st := subscriber.State(1); !strings.HasPrefix(st.String(), "State("); st++ {
		want = append(want, st)
	}
	var got []subscriber.State
	for st := subscriber.StatePending; st <= subscriber.StateStopped; st++ {
		got = append(got, st)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("StatePending..StateStopped = %v, want %v (every named State, in value order)", got, want)
	}
	if !slices.Contains(got, subscriber.StateHeld) || !slices.Contains(got, subscriber.StateStopped) {
		t.Fatalf("StatePending..StateStopped = %v lacks held or stopped", got)
	}
}
