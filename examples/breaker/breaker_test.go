package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestRun runs the example briefly in real time. It checks what does not
// depend on the machine's speed: no call lost in either service, the
// breaker's service queued fewer calls than the baseline (its first
// attempts stopped reaching the failing provider), and the table.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	res, err := run(config{duration: 2 * time.Second, rate: 100, open: 300 * time.Millisecond}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	base, br := res[0], res[1]
	if base.lost != 0 || br.lost != 0 {
		t.Errorf("lost %d (baseline) and %d (breaker), want none", base.lost, br.lost)
	}
	if br.ejected < 0 || br.queued >= base.queued {
		t.Errorf("breaker: ejected after %v, queued %d vs the baseline's %d; want ejected and fewer queued", br.ejected, br.queued, base.queued)
	}
	if !strings.Contains(out.String(), "baseline") || !strings.Contains(out.String(), "breaker") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestRunBadConfig(t *testing.T) {
	if _, err := run(config{}, &bytes.Buffer{}); err == nil {
		t.Error("zero config: no error")
	}
}
