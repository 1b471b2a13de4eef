package main

// End-to-end tests of the program: run() with real nacos-sdk-go clients
// against the embedded nacostest server over loopback, real HTTP providers
// on 127.0.0.1, and the real subscriber, cluster and failback packages.
//
// They run under -race: killing a provider closes its own naming client
// (CloseClient), which ends its connection without any reconnect, and the
// consumer's client never loses its connection. nacos-sdk-go v2.3.2's data
// race is in its reconnect path only; each run checks that no client
// reconnected (the server opened exactly one connection per client), so a
// change that made one reconnect would fail here rather than race.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

func TestMain(m *testing.M) { nacostest.VerifyTestMain(m) }

// common flags of the test runs: a short run, a fast backoff, shedding and
// malformed notifications on.
var common = []string{
	"-n", "60", "-rate", "200", "-providers", "2",
	"-shed-every", "5", "-retry-after", "1", "-bad-every", "7",
	"-progress", "100ms", "-log", "warn", "-sdk-log", "error",
	"-shutdown-timeout", "5s", "-startup-timeout", "15s",
}

// syncBuffer is a bytes.Buffer safe for concurrent writes; onWrite, if set,
// sees the whole output after each write.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	onWrite func(string)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	out := s.b.String()
	f := s.onWrite
	s.mu.Unlock()
	if f != nil {
		f(out)
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runProgram runs the program with args and returns its stdout. It fails
// the test if run returns an error other than wantErr's.
func runProgram(t *testing.T, ctx context.Context, stdout *syncBuffer, args ...string) string {
	t.Helper()
	var stderr syncBuffer
	start := time.Now()
	err := run(ctx, append(append([]string{}, common...), args...), stdout, &stderr)
	t.Logf("run took %v; stdout:\n%s", time.Since(start).Round(time.Millisecond), stdout.String())
	if s := stderr.String(); s != "" {
		t.Logf("stderr:\n%s", s)
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return stdout.String()
}

// accounting is the parsed end-of-run report.
type accounting struct {
	out string
	t   *testing.T
}

// n returns the number in the report row with this label.
func (a accounting) n(label string) int {
	a.t.Helper()
	re := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(label) + `\s+(\d+)`)
	m := re.FindStringSubmatch(a.out)
	if m == nil {
		a.t.Fatalf("no row %q in the output", label)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

var droppedLabels = []string{
	"dropped: not retryable (HTTP 4xx)",
	"dropped: gave up (not retryable on retry, or policy limit)",
	"dropped: retry queue full",
	"dropped: closed at shutdown",
	"dropped: other error (run interrupted)",
}

// checkIdentity checks the accounting every run must satisfy, whatever the
// timing: every notification sent is either delivered (and then a provider
// has it) or reported dropped, never both, never neither.
func checkIdentity(t *testing.T, out string, retries int) accounting {
	t.Helper()
	a := accounting{out: out, t: t}
	sent := a.n("sent")
	first, after := a.n("delivered on the first attempt"), a.n("delivered after retry")
	dropped := a.n(fmt.Sprintf("dropped: gave up after %d retries", retries))
	for _, l := range droppedLabels {
		dropped += a.n(l)
	}
	if first+after+dropped != sent {
		t.Errorf("delivered %d + %d, dropped %d: do not add up to %d sent", first, after, dropped, sent)
	}
	for _, l := range []string{"no outcome", "silently lost (neither delivered nor reported)", "of which reported delivered (silently lost)"} {
		if v := a.n(l); v != 0 {
			t.Errorf("%s: %d, want 0", l, v)
		}
	}
	if missing, reported := a.n("missing IDs (sent, never received)"), a.n("of which reported dropped"); missing != reported {
		t.Errorf("%d IDs missing at the providers, %d of them reported dropped", missing, reported)
	}
	// Every delivery is confirmed by a provider; a provider may also have
	// got a notification the consumer reported dropped (at-least-once).
	if distinct, ghosts := a.n("distinct IDs received"), a.n("received although reported dropped"); distinct != first+after+ghosts {
		t.Errorf("providers received %d distinct IDs, want %d delivered + %d received although reported dropped", distinct, first+after, ghosts)
	}
	// What each provider says it accepted adds up to the requests counted.
	var accepted int
	for _, m := range providerRow.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.Atoi(m[4])
		accepted += v
	}
	if m := regexp.MustCompile(`in (\d+) accepted requests`).FindStringSubmatch(out); m == nil || m[1] != strconv.Itoa(accepted) {
		t.Errorf("providers' table adds up to %d accepted requests; report says %v", accepted, m)
	}
	for _, want := range []string{
		"agrees with hooks and ledger: yes",
		"were at least that long, 0 shorter",
		"no client reconnected",
		"accounting identity (sent = delivered + reported dropped, 0 silently lost): holds",
		"shutdown: failback closed",
		"shutdown: subscription manager closed",
		"shutdown: registry stopped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	return a
}

var (
	providerRow = regexp.MustCompile(`(?m)^\s+(p\d+)\s+(127\.0\.0\.1:\d+)\s+(killed|stopped|serving)\s+accepted\s+(\d+)`)
	startedRow  = regexp.MustCompile(`provider (p\d+) serving on (127\.0\.0\.1:\d+), registered`)
	restartRow  = regexp.MustCompile(`restart: provider (p\d+) serving on (127\.0\.0\.1:\d+) \(new port; replaces (p\d+) on (127\.0\.0\.1:\d+)\)`)
)

// TestCrashAndRecover: the default scenario, shortened. Both providers
// crash after 18 of 60 notifications; the rest fail over to failback
// until replacements on new ports register. Retries are generous, so the
// retry machinery is exercised; the identity must hold whatever the timing.
func TestCrashAndRecover(t *testing.T) {
	out := runProgram(t, context.Background(), &syncBuffer{},
		"-kill-at", "0.3", "-down", "200ms",
		"-retries", "8", "-backoff", "50ms", "-backoff-max", "500ms", "-max-tasks", "200", "-drain", "15s")
	a := checkIdentity(t, out, 8)
	if a.n("sent") != 60 {
		t.Errorf("sent %d, want 60", a.n("sent"))
	}
	// The crash made calls fail over to failback, and retries delivered.
	if r, d := a.n("retried (queued by failback)"), a.n("delivered after retry"); r == 0 || d == 0 {
		t.Errorf("retried %d, delivered after retry %d: want both > 0", r, d)
	}
	// Notifications 7 and 14 are malformed and sent before the crash, to
	// live providers: 400, not retried.
	if v := a.n("dropped: not retryable (HTTP 4xx)"); v < 2 {
		t.Errorf("not retryable (HTTP 4xx): %d, want >= 2", v)
	}
	if !strings.Contains(out, "CRASH after 18 sent") {
		t.Error("no crash after 18 sent")
	}

	// The replacements run on new ports, and the providers' table agrees.
	first := map[string]string{} // name -> addr
	for _, m := range startedRow.FindAllStringSubmatch(out, -1) {
		first[m[1]] = m[2]
	}
	oldPorts := map[string]bool{}
	for _, addr := range first {
		oldPorts[addr] = true
	}
	restarts := restartRow.FindAllStringSubmatch(out, -1)
	if len(first) != 2 || len(restarts) != 2 {
		t.Fatalf("%d providers started and %d restarted, want 2 and 2", len(first), len(restarts))
	}
	for _, m := range restarts {
		if oldPorts[m[2]] {
			t.Errorf("replacement %s reuses the address %s", m[1], m[2])
		}
		if first[m[3]] != m[4] {
			t.Errorf("replacement %s replaces %s on %s, which was on %s", m[1], m[3], m[4], first[m[3]])
		}
	}
	states := map[string]string{}
	for _, m := range providerRow.FindAllStringSubmatch(out, -1) {
		states[m[1]] = m[3]
	}
	if want := map[string]string{"p1": "killed", "p2": "killed", "p3": "stopped", "p4": "stopped"}; fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("provider states %v, want %v", states, want)
	}
	// The consumer saw the replacements: its directory listed them, after
	// a push that lists them.
	if !strings.Contains(out, "consumer: the directory lists the 2 replacements") {
		t.Error("the directory never listed the replacements")
	}
	pushed := false
	for _, p := range regexp.MustCompile(`registry push: .*`).FindAllString(out, -1) {
		pushed = pushed || strings.Contains(p, restarts[0][2]) && strings.Contains(p, restarts[1][2])
	}
	if !pushed {
		t.Error("no registry push lists both replacements")
	}
	if !strings.Contains(out, "| directory lists") {
		t.Error("no progress line")
	}
}

// TestOverloadAndShutdown: a task limit of 3, one retry and a 30 s backoff
// (full jitter: a task waits up to 30 s), no drain: calls are refused for
// retry (queue full), and the tasks still waiting at the end are dropped by
// Close. Both are reported.
func TestOverloadAndShutdown(t *testing.T) {
	out := runProgram(t, context.Background(), &syncBuffer{},
		"-kill-at", "0.3", "-down", "200ms",
		"-retries", "1", "-backoff", "30s", "-backoff-max", "30s", "-max-tasks", "3", "-drain", "0s")
	a := checkIdentity(t, out, 1)
	if v := a.n("dropped: retry queue full"); v == 0 {
		t.Error("no call dropped for a full queue")
	}
	if v := a.n("dropped: closed at shutdown"); v == 0 {
		t.Error("no task dropped at shutdown")
	}
}

// TestInterrupted: cancelling run's context (SIGINT in main) at the crash
// stops sending; the run still shuts down, and accounts for what it sent.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := &syncBuffer{onWrite: func(out string) {
		if strings.Contains(out, "CRASH") {
			cancel()
		}
	}}
	out := runProgram(t, ctx, stdout, "-n", "2000", "-kill-at", "0.05", "-down", "10s", "-drain", "10s")
	a := checkIdentity(t, out, 4)
	if sent := a.n("sent"); sent < 100 || sent >= 2000 {
		t.Errorf("sent %d, want the ~100 sent before the interruption", sent)
	}
	if strings.Contains(out, "restart:") {
		t.Error("providers restarted after the interruption")
	}
}

// TestExternalRegistry: -nacos host:port, the path for a real Nacos server,
// against a nacostest server standing in for it (the SDK dials gRPC at
// port+1000, which is where HTTPPort points).
func TestExternalRegistry(t *testing.T) {
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", srv.HTTPPort())
	out := runProgram(t, context.Background(), &syncBuffer{},
		"-nacos", addr, "-n", "30", "-crash=false", "-service", "external.notify", "-drain", "15s")
	if !strings.Contains(out, "registry: Nacos at "+addr) {
		t.Errorf("output does not name the external registry %s", addr)
	}
	a := accounting{out: out, t: t}
	if sent, first, after := a.n("sent"), a.n("delivered on the first attempt"), a.n("delivered after retry"); sent != 30 || first == 0 || after == 0 {
		t.Errorf("sent %d, delivered %d first + %d after retry: want 30, > 0 (shedding is retried), > 0", sent, first, after)
	}
	if !strings.Contains(out, "accounting identity (sent = delivered + reported dropped, 0 silently lost): holds") {
		t.Error("accounting identity does not hold")
	}
	// The clients close their connections before run returns, but the
	// server sees each close when its stream ends, which a busy machine
	// can delay: wait for it, bounded.
	deadline := time.Now().Add(10 * time.Second)
	st := srv.Stats()
	for st.Connections != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		st = srv.Stats()
	}
	if st.ConnectionsOpened != 3 || st.Connections != 0 {
		t.Errorf("server stats %+v: want the 3 clients' connections opened, all closed (within 10s of the run's end)", st)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0"}, "-n must be at least 1"},
		{[]string{"-kill-at", "2", "-backoff", "2s", "-backoff-max", "1s"}, "-kill-at must be in [0, 1]"},
		{[]string{"-backoff", "2s", "-backoff-max", "1s"}, "-backoff-max must be at least -backoff"},
		{[]string{"-log", "loud"}, "-log:"},
		{[]string{"-nacos", "nohost"}, `-nacos "nohost"`},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &stdout, &stderr); err != flag.ErrHelp || !strings.Contains(stderr.String(), "-kill-at") {
		t.Errorf("-h: %v, usage %q", err, stderr.String())
	}
}
