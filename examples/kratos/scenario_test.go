//go:build !race

// The scenario restarts Nacos, which makes nacos-sdk-go v2.3.2 clients
// reconnect and trips the SDK's own data race in its reconnect path (see
// subscriber/nacos/nacostest): left out of -race builds.

package main

import (
	"bytes"
	"io"
	"testing"
	"time"

	klog "github.com/go-kratos/kratos/v2/log"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

func TestMain(m *testing.M) {
	klog.SetLogger(klog.NewStdLogger(io.Discard))
	nacostest.VerifyTestMain(m)
}

// TestScenario runs the scenario short and checks rebound's side against
// the targets; the baseline's figures are printed (they are the
// comparison), and only its dial failure, which the contrib registry's
// Watch makes certain, is checked.
func TestScenario(t *testing.T) {
	// A 5 s RPC timeout: on a loaded machine a 1 s one expired in a
	// starved load goroutine (1 RPC of 320 in the restart phase, on both
	// sides), which is not what the scenario measures.
	res, err := run(config{interval: 5 * time.Millisecond, timeout: 5 * time.Second, phase: 2 * time.Second,
		outage: 3 * time.Second, cacheDir: nacostest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printTable(&out, res)
	t.Logf("\n%s", out.String())
	rb, base := res.fleets[0], res.fleets[1]
	if rb.dialFailures != 0 {
		t.Errorf("rebound: %d dial failures at start, want 0", rb.dialFailures)
	}
	if rb.failed[phaseRestart] != 0 || rb.failed[phaseStop] != 0 {
		t.Errorf("rebound: %d RPCs failed in the restart, %d in App.Stop, want 0", rb.failed[phaseRestart], rb.failed[phaseStop])
	}
	for _, n := range []string{"p4", "p5"} {
		if rb.seen(rb.providers[n]) < 0 {
			t.Errorf("rebound never reached %s", n)
		}
	}
	if m := res.missing[rb]; len(m) > 0 {
		t.Errorf("rebound: providers missing at the end: %v", m)
	}
	if base.dialFailures == 0 {
		t.Errorf("baseline: no dial failure with Nacos down at start (its Watch subscribes once)")
	}
}
