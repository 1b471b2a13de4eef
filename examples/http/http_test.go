package main

import (
	"bytes"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestRun runs the comparison with 20 clients in real time. It checks what
// does not depend on the machine's speed: rebound applies no POST twice,
// with a key every POST succeeds, and the baselines (which retry a POST
// whose outcome is unknown) do apply duplicates.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	res, err := run(config{clients: 20, down: 200 * time.Millisecond}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	byName := map[string]result{}
	for _, r := range res {
		byName[r.name] = r
	}
	for _, n := range []string{"rebound", "rebound+key"} {
		if d := byName[n].duplicates; d != 0 {
			t.Errorf("%s applied %d duplicate POSTs", n, d)
		}
	}
	if r := byName["rebound+key"]; r.unknown != 0 || r.failed != 0 {
		t.Errorf("rebound+key: %d unknown, %d failed; want every POST answered", r.unknown, r.failed)
	}
	if r := byName["rebound"]; r.unknown != 20 {
		t.Errorf("rebound: %d POSTs unknown, want all 20 (each first POST is reset and not resent)", r.unknown)
	}
	if byName["go-retryablehttp"].duplicates == 0 || byName["fixed 100ms loop"].duplicates == 0 {
		t.Errorf("the baselines applied no duplicate: the fault server did not reset POSTs")
	}
}

func TestRunBadConfig(t *testing.T) {
	if _, err := run(config{}, &bytes.Buffer{}); err == nil {
		t.Error("zero config: no error")
	}
}
