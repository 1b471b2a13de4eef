package main

import (
	"bytes"
	"testing"
	"time"
)

// TestRollingEtcd (and TestRollingNacos): a rolling restart of 3 providers under 100 RPC/s fails
// no RPC with reboundgrpc.Drain; the plain stop's failures are printed
// beside it (the comparison, not checked: they depend on which calls were
// in flight).
func TestRollingEtcd(t *testing.T) { testRolling(t, "etcd") }

func testRolling(t *testing.T, registry string) {
	cfg := rollingConfig{registry: registry, providers: 3, rate: 100, work: 20 * time.Millisecond, timeout: 2 * time.Second, wait: 2 * time.Second}
	rs, err := runRolling(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printRolling(&out, cfg, rs)
	t.Logf("\n%s", out.String())
	if len(rs) != 2 || rs[1].mode != "rebound drain" {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if r.ok == 0 {
			t.Errorf("%s: no RPC succeeded", r.mode)
		}
	}
	if d := rs[1]; d.failed != 0 {
		t.Errorf("%d RPCs failed during the drained rolling restart (%v), want 0", d.failed, d.errs)
	}
}
