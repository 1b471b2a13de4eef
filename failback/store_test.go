package failback

import (
	"errors"
	"maps"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// memStore is an in-memory Store that records every change.
type memStore struct {
	mu      sync.Mutex
	next    uint64
	calls   map[uint64]StoredCall
	log     []string
	failAdd error

	quarantine map[uint64]error // Quarantine's records and reasons
	bad        map[uint64]error // Load reports these IDs with StoredCall.Err
}

func newMemStore() *memStore { return &memStore{calls: map[uint64]StoredCall{}} }

func (m *memStore) Add(c StoredCall) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failAdd != nil {
		return 0, m.failAdd
	}
	m.next++
	c.ID = m.next
	c.Attachments = maps.Clone(c.Attachments)
	m.calls[c.ID] = c
	m.log = append(m.log, "add")
	return c.ID, nil
}

func (m *memStore) Update(id uint64, attempts int, due time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.calls[id]; ok {
		c.Attempts, c.Due = attempts, due
		m.calls[id] = c
	}
	m.log = append(m.log, "update")
	return nil
}

func (m *memStore) Remove(id uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.calls, id)
	m.log = append(m.log, "remove")
	return nil
}

func (m *memStore) Load(fn func(StoredCall) error) error {
	m.mu.Lock()
	ids := make([]uint64, 0, len(m.calls))
	for id := range m.calls {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	calls := make([]StoredCall, len(ids))
	for i, id := range ids {
		calls[i] = m.calls[id]
	}
	m.mu.Unlock()
	for _, c := range calls {
		if err := m.bad[c.ID]; err != nil {
			c = StoredCall{ID: c.ID, Err: err}
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// Quarantine implements Store: the record moves to m.quarantine.
func (m *memStore) Quarantine(id uint64, reason error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.quarantine == nil {
		m.quarantine = map[uint64]error{}
	}
	m.quarantine[id] = reason
	delete(m.calls, id)
	m.log = append(m.log, "quarantine")
	return nil
}

func (m *memStore) snapshot() (map[uint64]StoredCall, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.calls), append([]string(nil), m.log...)
}

// A queued call is in the store when Invoke returns; each failed retry
// updates it; its end removes it. Every attempt carries the same key.
func TestStoreFollowsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		p := newProvider("a:1", downUntil(90*time.Second))
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(11)), withSeed(1))
		defer mustClose(t, f)

		inv := &cluster.Invocation{Method: "notify", Args: []any{"order-7", 3.0}, Attachments: map[string]string{"trace": "t1"}}
		if _, err := f.Invoke(callerCtx(), inv); err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		calls, log := st.snapshot()
		if len(calls) != 1 || !reflect.DeepEqual(log, []string{"add"}) {
			t.Fatalf("after Invoke: %d stored, log %v; want 1, [add]", len(calls), log)
		}
		c := calls[1]
		key := c.Attachments[IdempotencyKey]
		if c.Method != "notify" || string(c.Args) != `["order-7",3]` || c.Attempts != 1 || len(key) != 32 || c.Attachments["trace"] != "t1" {
			t.Errorf("stored %+v", c)
		}
		if _, ok := inv.Attachments[IdempotencyKey]; ok {
			t.Error("the caller's Invocation was modified")
		}
		if !c.Due.After(c.Born) {
			t.Errorf("due %v not after born %v", c.Due, c.Born)
		}

		time.Sleep(time.Hour)
		synctest.Wait()
		calls, log = st.snapshot()
		attempts := p.snapshot()
		if len(calls) != 0 || log[len(log)-1] != "remove" || len(log) != len(attempts) {
			t.Errorf("after success: %d stored, log %v for %d attempts; want 0, add, updates, remove", len(calls), log, len(attempts))
		}
		for i, a := range attempts {
			if a.inv.Attachments[IdempotencyKey] != key {
				t.Errorf("attempt %d has key %q, want %q", i+1, a.inv.Attachments[IdempotencyKey], key)
			}
		}
	})
}

// Close keeps the queued calls in the store; the next invoker loads them
// with their attempts and due times and finishes them, with the same key.
func TestStoreSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		down := newProvider("a:1", alwaysFail(errRefused))
		f := mustNew(t, cluster.NewStaticDirectory(down), WithStore(st, nil), WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(6)), withSeed(2))
		for i := range 10 {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m", Args: []any{float64(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(4 * time.Second) // some retries fail
		synctest.Wait()
		mustClose(t, f)
		before, _ := st.snapshot()
		if len(before) != 10 {
			t.Fatalf("%d calls stored after Close, want 10", len(before))
		}
		retried := 0
		for _, c := range before {
			if c.Attempts > 1 {
				retried++
			}
		}
		if retried == 0 {
			t.Fatal("no stored call recorded a retry")
		}

		up := newProvider("a:1", nil)
		rec := newRecorder()
		g := mustNew(t, cluster.NewStaticDirectory(up), WithStore(st, nil), WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(6)), withObserver(rec.hooks()))
		defer mustClose(t, g)
		if s := g.Stats(); s.Offered != 10 || s.Queued != 10 {
			t.Fatalf("after loading: %+v; want 10 offered and queued", s)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		after, _ := st.snapshot()
		s := g.Stats()
		checkStats(t, s)
		if len(after) != 0 || s.Succeeded != 10 {
			t.Fatalf("after the restart: %d stored, stats %+v; want 0 and 10 succeeded", len(after), s)
		}
		keys := map[string]bool{}
		for _, c := range before {
			keys[c.Attachments[IdempotencyKey]] = true
		}
		for _, a := range up.snapshot() {
			if !keys[a.inv.Attachments[IdempotencyKey]] {
				t.Errorf("attempt after restart with unknown key %q", a.inv.Attachments[IdempotencyKey])
			}
			if _, ok := a.inv.Args[0].(float64); !ok || len(a.inv.Args) != 1 {
				t.Errorf("args after restart %#v", a.inv.Args)
			}
		}
		// A call that had made k attempts makes attempt k+1 after the
		// restart, no earlier than its stored due time.
		for _, task := range rec.get("succeeded") {
			for _, c := range before {
				if c.Attachments[IdempotencyKey] == task.Invocation.Attachments[IdempotencyKey] && task.Attempts != c.Attempts+1 {
					t.Errorf("call with %d attempts stored succeeded at attempt %d, want %d", c.Attempts, task.Attempts, c.Attempts+1)
				}
			}
		}
	})
}

// A call whose retries run out after a restart gives up with the attempts
// it had left, and leaves the store.
func TestStoreRemainingAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		now := time.Now()
		id, _ := st.Add(StoredCall{Method: "m", Args: []byte(`[]`), Attempts: 3, Due: now.Add(time.Minute), Born: now.Add(-time.Minute)})
		p := newProvider("a:1", alwaysFail(errRefused))
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), WithPolicy(rebound.Policy{}, rebound.WithMaxAttempts(4)), withObserver(rec.hooks()))
		defer mustClose(t, f)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if n := len(p.snapshot()); n != 0 {
			t.Fatalf("%d attempts before the stored due time", n)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		calls, _ := st.snapshot()
		gave := rec.get("gaveup")
		if len(p.snapshot()) != 1 || len(gave) != 1 || gave[0].Attempts != 4 || len(calls) != 0 {
			t.Errorf("attempts %d, gave up %+v, stored %v (id %d); want 1 attempt, gave up after 4, none stored", len(p.snapshot()), gave, calls, id)
		}
		if age := gave[0].Age; age < time.Minute {
			t.Errorf("age %v, want at least the minute before the restart", age)
		}
	})
}

func TestStoreAddFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		st.failAdd = errors.New("disk full")
		p := newProvider("a:1", alwaysFail(errRefused))
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), withObserver(rec.hooks()))
		defer mustClose(t, f)
		_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"})
		var rej *rejectedError
		if !errors.As(err, &rej) || rej.Reason != ErrStore || !errors.Is(err, ErrStore) || !errors.Is(err, errRefused) {
			t.Fatalf("Invoke = %v; want a rejectedError (store) wrapping ErrStore and the attempt's error", err)
		}
		s := f.Stats()
		checkStats(t, s)
		if s.Dropped[ErrStore] != 1 || rec.count("dropped") != 1 || rec.count("queued") != 0 {
			t.Errorf("stats %+v, hooks %v", s, rec.get("dropped"))
		}
	})
}

func TestStoreLoadFails(t *testing.T) {
	st := newMemStore()
	st.Add(StoredCall{Method: "m", Args: []byte(`not json`)})
	_, err := New(cluster.NewStaticDirectory(newProvider("a:1", nil)), WithStore(st, nil))
	if !errors.Is(err, ErrStore) {
		t.Fatalf("New = %v, want ErrStore", err)
	}
}

type order struct {
	ID    string
	Items int
}

func TestJSONCodec(t *testing.T) {
	c := JSONCodec(func(method string) []any {
		if method == "place" {
			return []any{new(order), new(string)}
		}
		return nil
	})
	data, err := c.Marshal("place", []any{order{"o1", 2}, "fast"})
	if err != nil {
		t.Fatal(err)
	}
	args, err := c.Unmarshal("place", data)
	if err != nil || !reflect.DeepEqual(args, []any{order{"o1", 2}, "fast"}) {
		t.Errorf("typed: %#v, %v", args, err)
	}
	args, err = c.Unmarshal("other", data)
	if err != nil || !reflect.DeepEqual(args, []any{map[string]any{"ID": "o1", "Items": 2.0}, "fast"}) {
		t.Errorf("generic: %#v, %v", args, err)
	}
	if data, _ := JSONCodec(nil).Marshal("m", nil); string(data) != "[]" {
		t.Errorf("nil args: %s", data)
	}
	if _, err := JSONCodec(nil).Unmarshal("m", []byte("{")); err == nil {
		t.Error("bad JSON: no error")
	}
	if _, err := c.Unmarshal("place", []byte(`[1, "x"]`)); err == nil {
		t.Error("wrong type: no error")
	}
}

func TestIdempotencyKeyKept(t *testing.T) {
	inv := &cluster.Invocation{Attachments: map[string]string{IdempotencyKey: "mine"}}
	if withIdempotencyKey(inv) != inv {
		t.Error("an Invocation with a key was copied")
	}
	if a, b := newIdempotencyKey(), newIdempotencyKey(); a == b || len(a) != 32 {
		t.Errorf("keys %q, %q", a, b)
	}
}

// A panic in the Queued hook ends the call (GaveUp): it leaves the store.
func TestStoreQueuedHookPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		p := newProvider("a:1", alwaysFail(errRefused))
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil),
			withObserver(testHooks{Queued: func(Task) { panic("hook") }}))
		defer mustClose(t, f)
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
		calls, log := st.snapshot()
		if len(calls) != 0 || !reflect.DeepEqual(log, []string{"add", "remove"}) {
			t.Errorf("after a panicking Queued: %d stored, log %v; want 0, [add remove]", len(calls), log)
		}
	})
}

// A panic in the Retried hook ends the call (GaveUp) after its retry was
// recorded: the Store sees the update, then the removal.
func TestStoreRetriedHookPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		p := newProvider("a:1", alwaysFail(errRefused))
		rec := newRecorder()
		hooks := rec.hooks()
		hooks.Retried = func(Task) { panic("hook") }
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), withObserver(hooks))
		defer mustClose(t, f)
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		calls, log := st.snapshot()
		if len(calls) != 0 || !reflect.DeepEqual(log, []string{"add", "update", "remove"}) {
			t.Errorf("after a panicking Retried: %d stored, log %v; want 0, [add update remove]", len(calls), log)
		}
		if g := rec.get("gaveup"); len(g) != 1 {
			t.Errorf("gave up %+v; want the call given up once", g)
		}
		checkStats(t, f.Stats())
	})
}

// A protocol buffers message is refused by JSONCodec when the call is
// stored (it would come back as a map after a restart, which no gRPC call
// can send): Invoke reports the call as not queued, naming protocodec,
// instead of queueing a call the next process would give up.
func TestJSONCodecRefusesProtoMessages(t *testing.T) {
	msg := wrapperspb.String("order o1")
	if _, err := JSONCodec(nil).Marshal("Notify", []any{msg}); err == nil || !strings.Contains(err.Error(), "protocodec") {
		t.Fatalf("Marshal(proto message) = %v, want an error naming protocodec", err)
	}
	// A message passed by value (not a pointer) is a message too: JSON
	// gives it back as a map just the same.
	if _, err := JSONCodec(nil).Marshal("Notify", []any{*wrapperspb.String("order o1")}); err == nil || !strings.Contains(err.Error(), "protocodec") {
		t.Fatalf("Marshal(proto message by value) = %v, want an error naming protocodec", err)
	}
	if _, err := JSONCodec(nil).Marshal("Notify", []any{anypb.Any{TypeUrl: "x/y"}}); err != nil {
		t.Fatalf("Marshal(Any by value) = %v", err)
	}
	// An Any keeps its content as JSON (type URL and wire bytes).
	if _, err := JSONCodec(nil).Marshal("Notify", []any{&anypb.Any{TypeUrl: "x/y", Value: []byte{1}}}); err != nil {
		t.Fatalf("Marshal(Any) = %v", err)
	}
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		p := newProvider("a:1", alwaysFail(errRefused))
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil))
		defer mustClose(t, f)
		_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify", Args: []any{msg}})
		var rej *rejectedError
		if !errors.As(err, &rej) || rej.Reason != ErrStore || !strings.Contains(err.Error(), "protocodec") {
			t.Fatalf("Invoke with a proto message and JSONCodec = %v; want a rejectedError (store) naming protocodec", err)
		}
		if calls, _ := st.snapshot(); len(calls) != 0 {
			t.Fatalf("%d calls stored, want none", len(calls))
		}
	})
}
