package reboundkratos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/reboundkratos"
)

// TestDiscoveryFilteredOutLogsWhy: a list whose instances are all left out
// (unhealthy, in the Nacos format) reaches kratos as an empty list; the
// Discovery used to say nothing, it now logs why at Warn.
func TestDiscoveryFilteredOutLogsWhy(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	st := newMemStack(t, reboundkratos.FormatNacos, reboundkratos.WithLogger(zap.New(core)))
	a, b := nacosInst(9001, "v1"), nacosInst(9002, "v1")
	a.Healthy, b.Healthy = false, false
	st.reg.Set(orders, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := st.d.GetService(ctx, "orders.grpc")
	if err != nil || len(list) != 0 {
		t.Fatalf("GetService = %v, %v; want an empty list", list, err)
	}
	warned := logs.FilterMessageSnippet("left out").All()
	if len(warned) != 1 || !strings.Contains(fmt.Sprint(warned[0].ContextMap()), "2 instances, all unhealthy") {
		t.Fatalf("Warn lines %v; want one saying \"2 instances, all unhealthy\"", logs.All())
	}
}
