package reboundgrpc_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
	"github.com/rebound-go/rebound/failback/protocodec"
	"github.com/rebound-go/rebound/reboundgrpc"
)

// TestClassifyPushbackEveryCode: grpc-retry-pushback-ms is honoured on
// every retryable code (gRFC A6): a valid one is a RetryAfter, a negative,
// malformed or repeated one means "do not retry" (permanent); a pushback
// over 24 h is a pushback, capped by the retry loop's MaxRetryAfter.
func TestClassifyPushbackEveryCode(t *testing.T) {
	md := func(v ...string) metadata.MD {
		m := metadata.MD{}
		for _, s := range v {
			m.Append(reboundgrpc.PushbackTrailer, s)
		}
		return m
	}
	const huge = 1 << 62 // ms, beyond a time.Duration
	for _, tc := range []struct {
		code      codes.Code
		trailer   metadata.MD
		retryable bool
		after     time.Duration
	}{
		{codes.Unavailable, md("5000"), true, 5 * time.Second},
		{codes.Unavailable, md("-1"), false, 0},
		{codes.Unavailable, md("soon"), false, 0},
		{codes.Unavailable, md("1", "2"), false, 0},
		{codes.Unavailable, md("0"), true, 0},
		{codes.Aborted, md("250"), true, 250 * time.Millisecond},
		{codes.Aborted, md("-5"), false, 0},
		{codes.DeadlineExceeded, md("100"), true, 100 * time.Millisecond},
		{codes.DeadlineExceeded, md("x"), false, 0},
		{codes.ResourceExhausted, md("86400001"), true, 86400001 * time.Millisecond},
		{codes.Unavailable, md("86400001"), true, 86400001 * time.Millisecond},
		{codes.ResourceExhausted, md(strconv.FormatInt(huge, 10)), true, time.Duration(1<<63 - 1).Truncate(time.Millisecond)},
		{codes.ResourceExhausted, md("99999999999999999999"), true, time.Duration(1<<63 - 1).Truncate(time.Millisecond)},
		{codes.InvalidArgument, md("100"), false, 0}, // not retryable whatever the trailer
	} {
		err := reboundgrpc.Classify(status.Error(tc.code, "x"), tc.trailer)
		if got := failback.DefaultRetryable(err); got != tc.retryable {
			t.Errorf("%v %v: retryable = %v, want %v (%v)", tc.code, tc.trailer, got, tc.retryable, err)
		}
		d, ok := rebound.RetryAfterDelay(err)
		if tc.retryable && tc.code != codes.InvalidArgument && (!ok || d != tc.after) {
			t.Errorf("%v %v: RetryAfterDelay = %v, %v, want %v", tc.code, tc.trailer, d, ok, tc.after)
		}
		if !tc.retryable && !rebound.IsPermanent(err) {
			t.Errorf("%v %v: %v, want permanent", tc.code, tc.trailer, err)
		}
	}
	// A pushback of a day and a millisecond waits MaxRetryAfter, like a
	// Retry-After (the engine's cap), and is not "no pushback".
	r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Max: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, _ := r.NewSchedule(now).Admit(now)
	dec := a.Done(reboundgrpc.Classify(status.Error(codes.Unavailable, "x"), md("86400001")), now)
	if dec.Stop || dec.Delay != 5*time.Minute {
		t.Fatalf("next delay %v, stop %v; want the %v cap", dec.Delay, dec.Err, 5*time.Minute)
	}
	if d, ok := reboundgrpc.Pushback(md("86400001")); !ok || d != 86400001*time.Millisecond {
		t.Fatalf("Pushback(86400001) = %v, %v", d, ok)
	}
	if _, ok := reboundgrpc.Pushback(md("-1")); ok {
		t.Fatal("Pushback(-1) reported a delay")
	}
}

// recorder is a real health server that fails while down (Unavailable,
// with an optional pushback trailer) and records every Check it sees.
type recorder struct {
	backend
	down     atomic.Bool
	hang     atomic.Bool  // block every call until its context ends
	hanging  atomic.Int64 // calls blocked now
	pushback atomic.Value // string; "" for none
	mu       sync.Mutex
	services []string   // HealthCheckRequest.Service of served calls
	ids      [][]string // x-request-id of every call, served or not
	// stopped holds the x-proc of client processes that have stopped: the
	// server handles a request after its client sent it, so a call sent
	// by a process while the server was down may reach the handler after
	// the test brought the server back and the process stopped (its
	// outcome unknown to the client, which keeps it: at least once).
	// Calls of a stopped process are refused so that a test of a restart
	// sees only what the next process delivers.
	stopped map[string]bool
}

// procKey is the metadata key naming the client process of a call.
const procKey = "x-proc"

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.pushback.Store("")
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		rec.mu.Lock()
		rec.ids = append(rec.ids, md.Get("x-request-id"))
		procs := md.Get(procKey)
		gone := len(procs) > 0 && rec.stopped[procs[0]]
		rec.mu.Unlock()
		if gone {
			return nil, status.Error(codes.Unavailable, "client process stopped")
		}
		if rec.hang.Load() {
			rec.hanging.Add(1)
			<-ctx.Done()
			rec.hanging.Add(-1)
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if rec.down.Load() {
			if pb := rec.pushback.Load().(string); pb != "" {
				_ = grpc.SetTrailer(ctx, metadata.Pairs(reboundgrpc.PushbackTrailer, pb))
			}
			return nil, status.Error(codes.Unavailable, "down")
		}
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-served", "yes"))
		if r, ok := req.(*healthpb.HealthCheckRequest); ok {
			rec.mu.Lock()
			rec.services = append(rec.services, r.Service)
			rec.mu.Unlock()
			return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	rec.backend = backend{srv: s, lis: lis, addr: lis.Addr().String(), port: uint64(lis.Addr().(*net.TCPAddr).Port)}
	t.Cleanup(rec.stop)
	return rec
}

func (r *recorder) served() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.services)
}

func (r *recorder) requestIDs() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// newCC dials the recorder directly, closed at cleanup (Close is
// idempotent: a test may close it first).
func newCC(t *testing.T, r *recorder, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+r.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestPushbackOnUnavailable: over a real server, an Unavailable with a
// pushback of 5 s is retried no sooner, and one with -1 is not retried.
func TestPushbackOnUnavailable(t *testing.T) {
	rec := startRecorder(t)
	rec.down.Store(true)
	cc := newCC(t, rec)
	inv := reboundgrpc.NewInvoker(cc, grpc.WaitForReady(true))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	call := &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{}}}

	rec.pushback.Store("5000")
	_, err := inv.Invoke(ctx, call)
	if d, ok := rebound.RetryAfterDelay(err); !ok || d != 5*time.Second || !failback.DefaultRetryable(err) {
		t.Fatalf("Unavailable with a 5000 ms pushback: %v (retry after %v, %v)", err, d, ok)
	}

	rec.pushback.Store("-1")
	h := newHookLog()
	fb, err := failback.New(cluster.NewStaticDirectory(inv), failback.WithPolicy(failback.DefaultPolicy(), rebound.WithMaxAttempts(4), rebound.WithObserver(h.hooks())))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if _, err := fb.Invoke(ctx, call); status.Code(err) != codes.Unavailable || !rebound.IsPermanent(err) {
		t.Fatalf("Unavailable with pushback -1: %v, want it returned at once, not queued", err)
	}
	if st := fb.Stats(); st.Queued != 0 {
		t.Fatalf("stats %+v, want nothing queued", st)
	}
}

// TestFireAndForgetInterceptorsOnce: an interceptor placed before the
// FireAndForget runs once for the first attempt (which continues the chain
// and uses the caller's call options), and once for each background retry
// (a call of its own through the whole chain).
func TestFireAndForgetInterceptorsOnce(t *testing.T) {
	rec := startRecorder(t)
	var n atomic.Int64
	outer := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", strconv.FormatInt(n.Add(1), 10))
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ff := reboundgrpc.NewFireAndForget(checkMethod)
	cc := newCC(t, rec, grpc.WithChainUnaryInterceptor(outer, ff.UnaryClientInterceptor()))
	h := newHookLog()
	fb, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc, grpc.WaitForReady(true))),
		failback.WithPolicy(rebound.Policy{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}, rebound.WithObserver(h.hooks())))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ff.Bind(fb)
	client := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Served at once: the outer interceptor ran once, the caller's call
	// option (grpc.Header) saw the attempt.
	var hdr metadata.MD
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "a"}, grpc.WaitForReady(true), grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if ids := rec.requestIDs(); len(ids) != 1 || !slices.Equal(ids[0], []string{"1"}) {
		t.Fatalf("the server saw x-request-id %v, want [[1]] (the outer interceptor once)", ids)
	}
	if got := hdr.Get("x-served"); !slices.Equal(got, []string{"yes"}) {
		t.Fatalf("header %v: the caller's call options were not used on the first attempt", hdr)
	}

	// Failed, queued, retried: the retry is a call of its own.
	rec.down.Store(true)
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "b"}); err != nil {
		t.Fatalf("Check: %v, want queued (nil)", err)
	}
	rec.down.Store(false)
	select {
	case <-h.succeeded:
	case task := <-h.gaveUp:
		t.Fatalf("gave up: %v", task.Err)
	case <-ctx.Done():
		t.Fatal("no retry succeeded")
	}
	ids := rec.requestIDs()
	if len(ids) < 3 || !slices.Equal(ids[1], []string{"2"}) {
		t.Fatalf("x-request-id %v: want the second call's first attempt with [2] only", ids)
	}
	for i, id := range ids[2:] {
		if len(id) != 1 || id[0] != strconv.Itoa(i+3) {
			t.Fatalf("x-request-id %v: want each retry with one id of its own", ids)
		}
	}
	if got := rec.served(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("served %v, want [a b]", got)
	}
}

// durable is a failback Invoker over a ClientConn with a boltstore file:
// one process of a restart test.
type durable struct {
	st *boltstore.Store
	cc *grpc.ClientConn
	fb *failback.Invoker
	ff *reboundgrpc.FireAndForget
	h  *hookLog
	// proc names the process in every call's metadata (procKey).
	proc string
	rec  *recorder
}

// procs numbers the processes of openDurable.
var procs atomic.Int64

func openDurable(t *testing.T, path string, rec *recorder, opts ...failback.Option) *durable {
	t.Helper()
	return openDurableCodec(t, path, rec, nil, opts...)
}

// openDurableCodec is openDurable with the store's codec (nil: JSON).
func openDurableCodec(t *testing.T, path string, rec *recorder, codec failback.Codec, opts ...failback.Option) *durable {
	t.Helper()
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	d := &durable{st: st, ff: reboundgrpc.NewFireAndForget(checkMethod), h: newHookLog(), proc: strconv.FormatInt(procs.Add(1), 10), rec: rec}
	name := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, procKey, d.proc), method, req, reply, cc, opts...)
	}
	d.cc = newCC(t, rec, grpc.WithChainUnaryInterceptor(name, d.ff.UnaryClientInterceptor()))
	d.h.gaveUp = make(chan failback.Task, 100)
	d.h.succeeded = make(chan failback.Task, 100)
	d.fb, err = failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(d.cc)),
		append([]failback.Option{
			failback.WithStore(st, codec),
			failback.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}, rebound.WithObserver(d.h.hooks())),
		}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.fb.Close() })
	d.ff.Bind(d.fb)
	return d
}

// stop closes the process's failback Invoker, ClientConn and store.
func (d *durable) stop(t *testing.T) {
	t.Helper()
	d.rec.mu.Lock()
	if d.rec.stopped == nil {
		d.rec.stopped = map[string]bool{}
	}
	d.rec.stopped[d.proc] = true
	d.rec.mu.Unlock()
	_ = d.fb.Close()
	_ = d.cc.Close()
	if err := d.st.Close(); err != nil {
		t.Fatal(err)
	}
}

// wait collects n outcomes (Succeeded or GaveUp) before the deadline.
func (d *durable) wait(t *testing.T, n int) (ok, gaveUp []failback.Task) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for len(ok)+len(gaveUp) < n {
		select {
		case task := <-d.h.succeeded:
			ok = append(ok, task)
		case task := <-d.h.gaveUp:
			gaveUp = append(gaveUp, task)
		case <-deadline.C:
			l, err := stored(d.st)
			t.Fatalf("%d of %d calls ended (%d succeeded, gave up %v); failback %+v, store %d (%v)", len(ok)+len(gaveUp), n, len(ok), errsOf(gaveUp), d.fb.Stats(), l, err)
		}
	}
	return ok, gaveUp
}

func errsOf(ts []failback.Task) []error {
	var out []error
	for _, t := range ts {
		out = append(out, t.Err)
	}
	return out
}

// queued waits until the store holds n calls.
func (d *durable) queued(t *testing.T, n int) {
	t.Helper()
	eventually(t, strconv.Itoa(n)+" calls in the store", func() bool {
		l, err := stored(d.st)
		return err == nil && l == n
	})
}

// TestStoredCallSurvivesRestart: a FireAndForget call queued in a
// boltstore with failback's default JSONCodec is delivered, with its
// content, by the next process (old: the request came back as a map, gRPC
// could not send it, the call was given up as Internal). A call made with
// Invoke and protocodec is delivered too; one made with Invoke and the
// JSONCodec is refused at Invoke with an error naming the fix.
func TestStoredCallSurvivesRestart(t *testing.T) {
	rec := startRecorder(t)
	rec.down.Store(true)
	dir := t.TempDir()
	jsonPath, protoPath := filepath.Join(dir, "json.db"), filepath.Join(dir, "proto.db")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	p1 := openDurable(t, jsonPath, rec)
	if _, err := healthpb.NewHealthClient(p1.cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "via-interceptor"}); err != nil {
		t.Fatalf("Check: %v, want queued", err)
	}
	// A message passed to Invoke is refused by the JSONCodec at once, the
	// call reported as not queued (the caller still has it), rather than
	// given up by the next process.
	_, err := p1.fb.Invoke(ctx, &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{Service: "via-invoke-json"}}})
	if !errors.Is(err, failback.ErrStore) || !strings.Contains(err.Error(), "protocodec") {
		t.Fatalf("Invoke of a message with the JSONCodec: %v, want a RejectedError (store) naming protocodec", err)
	}
	p1.queued(t, 1)
	p1.stop(t)

	q1 := openDurableCodec(t, protoPath, rec, protocodec.New(nil))
	if _, err := q1.fb.Invoke(ctx, &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{Service: "via-invoke-proto"}}}); err != nil {
		t.Fatalf("Invoke: %v, want queued", err)
	}
	if _, err := healthpb.NewHealthClient(q1.cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "via-interceptor-proto"}); err != nil {
		t.Fatalf("Check: %v, want queued", err)
	}
	q1.queued(t, 2)
	q1.stop(t)

	rec.down.Store(false)
	p2 := openDurable(t, jsonPath, rec)
	ok, gaveUp := p2.wait(t, 1)
	if len(ok) != 1 || len(gaveUp) != 0 {
		t.Fatalf("JSONCodec store after the restart: %d delivered, gave up %v; want 1 and none", len(ok), errsOf(gaveUp))
	}
	q2 := openDurableCodec(t, protoPath, rec, protocodec.New(nil))
	if ok, gaveUp := q2.wait(t, 2); len(ok) != 2 {
		t.Fatalf("protocodec store after the restart: %d delivered, gave up %v; want 2", len(ok), errsOf(gaveUp))
	}
	got := rec.served()
	slices.Sort(got)
	if want := []string{"via-interceptor", "via-interceptor-proto", "via-invoke-proto"}; !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}

// TestClientConnClosedBeforeInvoker: closing the ClientConn before the
// failback Invoker keeps the queued calls (Canceled "client connection is
// closing" is failback.Stopping), so they stay in the store and the next process,
// on a new ClientConn, delivers them (old: each became a give-up).
func TestClientConnClosedBeforeInvoker(t *testing.T) {
	rec := startRecorder(t)
	rec.down.Store(true)
	path := filepath.Join(t.TempDir(), "calls.db")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	p1 := openDurable(t, path, rec)
	var retried atomic.Int64
	for i := range 3 {
		if _, err := healthpb.NewHealthClient(p1.cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "call-" + strconv.Itoa(i)}); err != nil {
			t.Fatalf("Check: %v, want queued", err)
		}
	}
	p1.queued(t, 3)
	_ = p1.cc.Close() // before the failback Invoker
	// Every call's next retry meets the closed ClientConn: marked
	// failback.Stopping, it is not retried again in this process and not
	// given up (DropClosed), and stays in the store.
	eventually(t, "every call's retry on the closed ClientConn", func() bool {
		retried.Store(int64(p1.fb.Stats().Dropped[failback.ErrClosed]))
		return retried.Load() >= 3 || len(p1.h.gaveUp) > 0
	})
	select {
	case task := <-p1.h.gaveUp:
		t.Fatalf("a queued call was given up after the ClientConn closed: %v", task.Err)
	default:
	}
	if l, err := stored(p1.st); err != nil || l != 3 {
		t.Fatalf("store holds %d calls (%v), want 3", l, err)
	}
	p1.stop(t)

	rec.down.Store(false)
	p2 := openDurable(t, path, rec)
	if ok, gaveUp := p2.wait(t, 3); len(ok) != 3 {
		t.Fatalf("after the restart: %d delivered, gave up %v; want 3", len(ok), errsOf(gaveUp))
	}
	got := rec.served()
	slices.Sort(got)
	if want := []string{"call-0", "call-1", "call-2"}; !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}

// TestQueuedRequestUndecodable: a queued FireAndForget request whose type
// this binary does not know is a permanent ErrInvalidArgument naming the
// type, never sent; a map that is not a queued request is sent as it is
// (a custom codec may send maps) and the proto codec's failure explained.
func TestQueuedRequestUndecodable(t *testing.T) {
	rec := startRecorder(t)
	inv := reboundgrpc.NewInvoker(newCC(t, rec), grpc.WaitForReady(true))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := inv.Invoke(ctx, &cluster.Invocation{Method: checkMethod, Args: []any{map[string]any{"type_url": "reboundgrpc.request/no.such.Type"}}})
	if !rebound.IsPermanent(err) || !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "no.such.Type") {
		t.Fatalf("unknown queued type: %v", err)
	}
	_, err = inv.Invoke(ctx, &cluster.Invocation{Method: checkMethod, Args: []any{map[string]any{"service": "x"}}})
	if !rebound.IsPermanent(err) || !errors.Is(err, rebound.ErrInvalidArgument) || status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "protocodec") {
		t.Fatalf("a JSON-decoded message: %v, want Internal explained (naming protocodec)", err)
	}
	if n := len(rec.requestIDs()); n != 0 {
		t.Fatalf("%d calls reached the server, want none", n)
	}
}

// TestCloseDuringRetryKeepsCall: closing the failback Invoker while a
// retry is in flight (its context cancelled by Close) leaves the call in
// the store for the next process (old: the attempt's Canceled status was
// permanent and the call was given up and removed).
func TestCloseDuringRetryKeepsCall(t *testing.T) {
	rec := startRecorder(t)
	rec.down.Store(true)
	path := filepath.Join(t.TempDir(), "calls.db")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p1 := openDurable(t, path, rec)
	if _, err := healthpb.NewHealthClient(p1.cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "in-flight"}); err != nil {
		t.Fatalf("Check: %v, want queued", err)
	}
	p1.queued(t, 1)
	rec.hang.Store(true)
	eventually(t, "a retry in flight", func() bool { return rec.hanging.Load() == 1 })
	p1.stop(t)
	select {
	case task := <-p1.h.gaveUp:
		t.Fatalf("the in-flight call was given up at Close: %v", task.Err)
	default:
	}
	rec.hang.Store(false)
	rec.down.Store(false)
	p2 := openDurable(t, path, rec)
	if ok, gaveUp := p2.wait(t, 1); len(ok) != 1 {
		t.Fatalf("after the restart: gave up %v, want the call delivered", errsOf(gaveUp))
	}
	if got := rec.served(); !slices.Equal(got, []string{"in-flight"}) {
		t.Fatalf("served %v", got)
	}
}

// stored counts the calls st holds.
func stored(st *boltstore.Store) (n int, err error) {
	err = st.Load(func(failback.StoredCall) error { n++; return nil })
	return n, err
}
