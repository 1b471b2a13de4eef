package subscriber_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/subscriber"
)

// States lists every State String knows by name, in value order: the
// values from 1 up to the first that String prints as "State(n)".
func TestStatesCoversEveryState(t *testing.T) {
	var want []subscriber.State
	for st := subscriber.State(1); !strings.HasPrefix(st.String(), "State("); st++ {
		want = append(want, st)
	}
	got := subscriber.States()
	if !slices.Equal(got, want) {
		t.Fatalf("States() = %v, want %v (every named State, in value order)", got, want)
	}
	if !slices.Contains(got, subscriber.StateHeld) || !slices.Contains(got, subscriber.StateStopped) {
		t.Fatalf("States() = %v lacks held or stopped", got)
	}
	got[0] = subscriber.StateStopped // the caller's copy
	if subscriber.States()[0] != subscriber.StatePending {
		t.Fatal("States returned a shared slice")
	}
}
