package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/subscriber"
)

// With WithFilter, the directory cannot know why its filter refused an
// instance: List's error must not blame a field the filter may not have
// looked at.
func TestRegistryDirectoryCustomFilterBlamesTheFilter(t *testing.T) {
	zoneA := func(in subscriber.Instance) bool { return in.Metadata["zone"] == "a" }
	d, _ := newDir(t, WithFilter(zoneA))
	off := inst("10.0.0.1", 80)
	off.Enabled = false // drained, and in another zone: the filter refuses it for the zone
	d.Update([]subscriber.Instance{off})
	_, err := d.List(context.Background(), nil)
	if !errors.Is(err, ErrNoInvokers) || strings.Contains(err.Error(), "disabled") || !strings.Contains(err.Error(), "refused by the filter") {
		t.Fatalf("List = %v; want ErrNoInvokers saying the filter refused it, not guessing why", err)
	}
}
