package reboundgrpc_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
)

// With WithFilter, the Builder cannot know why its filter refused an
// instance: its Warn line must not blame a field the filter may not have
// looked at (the default filter does not even look at Weight).
func TestFilteredOutWithCustomFilterBlamesTheFilter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		zoneA := func(in subscriber.Instance) bool { return in.Metadata["zone"] == "a" }
		core, logs := observer.New(zapcore.WarnLevel)
		reg, _, b := memEnvWith(t, nil, reboundgrpc.WithFilter(zoneA), reboundgrpc.WithLogger(zap.New(core)))
		w0 := func(in *subscriber.Instance) { in.Weight = 0 }
		reg.Set(orders, inst(1, w0), inst(2, w0), inst(3, w0)) // zone z1, weight 0: refused for the zone
		r, err := b.Build(mustTarget(t, "rebound:///orders"), newFakeCC(), resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		synctest.Wait()
		lines := logs.FilterMessage("every instance is filtered out").All()
		if len(lines) != 1 {
			t.Fatalf("%d Warn lines, want 1", len(lines))
		}
		why, _ := lines[0].ContextMap()["why"].(string)
		if strings.Contains(why, "weight 0") || !strings.Contains(why, "refused by the filter") {
			t.Errorf("why = %q; the custom filter refused them, not their weight", why)
		}
	})
}
