package boltstore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
)

func TestMain(m *testing.M) {
	if childMain() {
		return
	}
	goleak.VerifyTestMain(m)
}

func open(t testing.TB, path string, opts ...boltstore.Option) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func load(t testing.TB, s *boltstore.Store) []failback.StoredCall {
	t.Helper()
	var calls []failback.StoredCall
	if err := s.Load(func(c failback.StoredCall) error { calls = append(calls, c); return nil }); err != nil {
		t.Fatal(err)
	}
	return calls
}

func TestAddUpdateRemoveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.db")
	s := open(t, path)
	born := time.Unix(1700000000, 123456789)
	a := failback.StoredCall{Method: "notify", Attachments: map[string]string{failback.IdempotencyKey: "k1", "x": ""},
		Args: []byte(`["a",1]`), Attempts: 1, Due: born.Add(time.Second), Born: born}
	b := failback.StoredCall{Method: "audit", Attempts: 1, Due: born.Add(2 * time.Second), Born: born}
	ida, err := s.Add(a)
	if err != nil {
		t.Fatal(err)
	}
	idb, err := s.Add(b)
	if err != nil || ida == 0 || idb <= ida {
		t.Fatalf("ids %d, %d, %v; want increasing, not 0", ida, idb, err)
	}
	if err := s.Update(ida, 3, born.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(999, 3, born); err != nil { // unknown: nothing
		t.Fatal(err)
	}
	if err := s.Remove(idb); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(idb); err != nil { // twice: fine
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Add(a); !errors.Is(err, rebound.ErrClosed) {
		t.Errorf("Add after Close: %v, want ErrClosed", err)
	}

	s = open(t, path)
	defer s.Close()
	got := load(t, s)
	a.ID, a.Attempts, a.Due = ida, 3, born.Add(time.Minute)
	if len(got) != 1 || !reflect.DeepEqual(got[0], a) {
		t.Fatalf("reloaded %+v\nwant %+v", got, a)
	}
	// IDs keep increasing after a reopen.
	if id, err := s.Add(b); err != nil || id <= idb {
		t.Errorf("id after reopen %d (%v), want > %d", id, err, idb)
	}
	if n, err := s.Len(); n != 2 || err != nil {
		t.Errorf("Len = %d, %v; want 2", n, err)
	}
	stop := errors.New("stop")
	if err := s.Load(func(failback.StoredCall) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Load returned %v, want fn's error", err)
	}
}

// Concurrent changes share commits: with 64 callers, far fewer commits
// than changes.
func TestGroupCommit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "calls.db"))
	defer s.Close()
	const callers, each = 64, 20
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				id, err := s.Add(failback.StoredCall{Method: "m", Due: time.Now(), Born: time.Now()})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.Remove(id); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.Ops != 2*callers*each || st.Commits >= st.Ops/2 || st.MaxBatch < 2 {
		t.Errorf("stats %+v: want %d ops in far fewer commits", st, 2*callers*each)
	}
	if n, _ := s.Len(); n != 0 {
		t.Errorf("%d calls left, want 0", n)
	}
	t.Logf("%d changes in %d commits, largest %d", st.Ops, st.Commits, st.MaxBatch)
}

func TestOpenErrors(t *testing.T) {
	if _, err := boltstore.Open(filepath.Join(t.TempDir(), "x.db"), boltstore.WithOpenTimeout(0)); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("WithOpenTimeout(0): %v, want ErrInvalidArgument", err)
	}
	if _, err := boltstore.Open(filepath.Join(t.TempDir(), "no", "such", "dir.db")); err == nil {
		t.Error("Open in a missing directory: no error")
	}
	path := filepath.Join(t.TempDir(), "locked.db")
	s := open(t, path)
	defer s.Close()
	if _, err := boltstore.Open(path, boltstore.WithOpenTimeout(50*time.Millisecond)); err == nil {
		t.Error("second Open of a locked file: no error")
	}
}

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	st, err := boltstore.Open(filepath.Join(dir, "failback.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	id, _ := st.Add(failback.StoredCall{Method: "notify", Attempts: 1, Due: time.Now(), Born: time.Now()})
	_ = st.Close()

	st, _ = boltstore.Open(filepath.Join(dir, "failback.db")) // after a restart
	defer st.Close()
	_ = st.Load(func(c failback.StoredCall) error {
		fmt.Println(c.ID == id, c.Method, c.Attempts)
		return nil
	})
	// Output:
	// true notify 1
}
