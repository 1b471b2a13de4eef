package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
)

const sampleCalls = 120

// sample writes a store of sampleCalls calls (several leaf pages under a
// branch page) and returns its bytes.
func sample(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sample.db")
	s := open(t, path, boltstore.WithNoSync())
	now := time.Unix(1700000000, 0)
	for i := range sampleCalls {
		if _, err := s.Add(failback.StoredCall{Method: "notify", Attachments: map[string]string{failback.IdempotencyKey: fmt.Sprintf("key-%03d", i)},
			Args: []byte(fmt.Sprintf(`["order-%03d %s"]`, i, strings.Repeat("x", 150))), Attempts: 1, Due: now, Born: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openDamaged opens a file holding data. It returns the Open error (which
// must name the file), or, if Open accepted the file, checks that the store
// works: Load, an Add, a Close, a reopen. A crash of bbolt kills the test
// binary, which is the failure this guards against.
func openDamaged(t *testing.T, data []byte) (loaded int, err error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.Open(path, boltstore.WithNoSync())
	if err != nil {
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("Open error %q does not name the file", err)
		}
		return 0, err
	}
	if err := s.Load(func(c failback.StoredCall) error {
		if c.Err == nil {
			loaded++
		}
		return nil
	}); err != nil {
		t.Fatalf("Load of an accepted file: %v", err)
	}
	if _, err := s.Add(failback.StoredCall{Method: "after", Due: time.Now(), Born: time.Now()}); err != nil {
		t.Fatalf("Add to an accepted file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// bbolt writes on what it read: damage the check could not see (a
	// record's key made longer, still in order) can come back as damage it
	// sees. Reopening may then fail, naming the file, but not crash.
	s, err = boltstore.Open(path, boltstore.WithNoSync())
	if err != nil {
		if !errors.Is(err, boltstore.ErrDamaged) || !strings.Contains(err.Error(), path) {
			t.Fatalf("reopening a file bbolt wrote: %v", err)
		}
		return loaded, nil
	}
	if n, err := s.Len(); err != nil || n < 1 {
		t.Fatalf("Len after reopen = %d, %v", n, err)
	}
	return loaded, s.Close()
}

// A truncated store file (a half-written copy, a full disk) made Open kill
// the process: SIGBUS ("fatal error: fault") reading a page beyond the end
// of the file, or a bbolt assertion panic. Open returns an error naming the
// file now, at every length, mid-page included; a file cut only in its
// unused tail still opens with every call.
func TestTruncatedFileIsAnError(t *testing.T) {
	data := sample(t)
	ps := os.Getpagesize()
	sizes := []int{1, 100, 1023, 1024, 4095, 4096, 4097, 2*ps - 1, 2 * ps, 2*ps + 1, 3*ps + ps/2}
	for n := 4 * ps; n < len(data); n += ps {
		sizes = append(sizes, n-1, n, n+ps/3) // page boundaries and mid-page
	}
	failed, whole := 0, 0
	for _, n := range sizes {
		if n <= 0 || n >= len(data) {
			continue
		}
		loaded, err := openDamaged(t, data[:n])
		switch {
		case err != nil:
			if n >= 2*ps && !errors.Is(err, boltstore.ErrDamaged) {
				t.Errorf("cut at %d of %d bytes: %v; want ErrDamaged", n, len(data), err)
			}
			failed++
		case loaded != sampleCalls:
			t.Errorf("cut at %d of %d bytes: opened with %d of %d calls", n, len(data), loaded, sampleCalls)
		default:
			whole++
		}
	}
	t.Logf("%d bytes (%d-byte pages): %d cuts refused, %d cut only unused space and opened whole", len(data), ps, failed, whole)
	if failed < len(sizes)/3 {
		t.Errorf("only %d of %d cuts refused", failed, len(sizes))
	}
	if loaded, err := openDamaged(t, nil); err != nil || loaded != 0 {
		t.Errorf("empty file: %d, %v; want a new, empty store", loaded, err)
	}
}

// A damaged page made bbolt panic on a goroutine of its own (read-write
// Open always rebuilds the freelist, walking every page), where no caller
// can recover. Damage anywhere in the file is now an Open error naming the
// file, or a file that works (bytes in free space, in a record's value, in
// the older meta page), never a crash.
func TestDamagedPagesAreAnError(t *testing.T) {
	data := sample(t)
	ps := os.Getpagesize()
	used := len(data) // the pages in use: the shortest whole-page cut that opens whole
	for n := 2 * ps; n < len(data); n += ps {
		if loaded, err := openDamaged(t, data[:n]); err == nil && loaded == sampleCalls {
			used = n
			break
		}
	}
	stride := 173 // inside pages
	if testing.Short() {
		stride = 997
	}
	var offsets []int
	for p := 0; p < used; p += ps {
		for i := range 16 { // every byte of every page header: id, flags, count, overflow
			offsets = append(offsets, p+i)
		}
		for i := 16 + stride/2; i < ps; i += stride {
			offsets = append(offsets, p+i)
		}
	}
	refused, accepted := 0, 0
	for _, off := range offsets {
		d := append([]byte(nil), data...)
		d[off] ^= 0xFF
		if _, err := openDamaged(t, d); err != nil {
			refused++
		} else {
			accepted++
		}
	}
	t.Logf("%d of %d bytes in use (%d-byte pages): %d damaged copies refused, %d accepted (the damage missed the structure)",
		used, len(data), ps, refused, accepted)
	if refused < used/ps*8 {
		t.Errorf("only %d damaged copies refused; want at least the damaged page ids of every page in use", refused)
	}
}

// Len after Close returned bbolt's "database not open"; every method of a
// closed Store returns an error matching rebound.ErrClosed.
func TestMethodsAfterClose(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "calls.db"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Len":        func() error { _, err := s.Len(); return err }(),
		"Load":       s.Load(func(failback.StoredCall) error { return nil }),
		"Add":        func() error { _, err := s.Add(failback.StoredCall{}); return err }(),
		"Update":     s.Update(1, 2, time.Now()),
		"Remove":     s.Remove(1),
		"Quarantine": s.Quarantine(1, errors.New("x")),
	} {
		if !errors.Is(err, rebound.ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", name, err)
		}
	}
}

// One undecodable record made failback.New fail for the whole store, with
// an error that named no record. The record is named (file, bucket, key),
// and WithQuarantine moves it to the quarantine bucket so the good calls
// load.
func TestUndecodableRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.db")
	s := open(t, path)
	now := time.Now()
	for i := range 3 {
		if _, err := s.Add(failback.StoredCall{Method: "m", Args: []byte(fmt.Sprintf("[%d]", i)), Attempts: 1, Due: now, Born: now}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// Damage records 2 and "bad" (a key that is not an ID) through bbolt itself.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("failback-calls"))
		if err := b.Put([]byte{0, 0, 0, 0, 0, 0, 0, 2}, []byte{1, 0, 0}); err != nil {
			return err
		}
		return b.Put([]byte("bad"), []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	dir := cluster.NewStaticDirectory(okInvoker{})
	s = open(t, path)
	_, err = failback.New(dir, failback.WithStore(s, nil))
	if !errors.Is(err, failback.ErrBadRecord) || !errors.Is(err, boltstore.ErrDamaged) ||
		!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `bucket "failback-calls" key 0000000000000002`) {
		t.Fatalf("New = %v; want a bad record named by file, bucket and key", err)
	}

	f, err := failback.New(dir, failback.WithStore(s, nil), failback.WithQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Quarantined != 2 || st.Offered != 2 {
		t.Errorf("stats %+v; want 2 quarantined (record 2, key \"bad\"), 2 loaded", st)
	}
	if err := f.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Len(); n != 0 || err != nil || s.Stats().Quarantined != 2 {
		t.Errorf("Len %d (%v), stats %+v; want the good calls delivered, 2 quarantined", n, err, s.Stats())
	}
	s.Close()
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		q := tx.Bucket([]byte("failback-quarantine"))
		if q == nil || q.Stats().KeyN != 2 || q.Get([]byte("bad")) == nil {
			t.Errorf("quarantine bucket %v; want the 2 bad records, bytes kept", q)
		}
		return nil
	})
}

type okInvoker struct{}

func (okInvoker) Target() string                                           { return "ok" }
func (okInvoker) Invoke(context.Context, *cluster.Invocation) (any, error) { return nil, nil }

// The check must never refuse a file bbolt wrote: random workloads (adds,
// removes of the first keys and others, updates, values spanning overflow
// pages; raw bbolt files with nested and inline buckets, random keys and a
// synced freelist) reopen every time.
func TestCheckAcceptsWhatBboltWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 4 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("store-%d.db", round))
		live := map[uint64]bool{}
		for phase := range 6 {
			s := open(t, path, boltstore.WithNoSync())
			for range 60 + r.IntN(200) {
				switch k := r.IntN(10); {
				case k < 5:
					id, err := s.Add(failback.StoredCall{Method: "m", Args: make([]byte, r.IntN(300)+r.IntN(2)*r.IntN(20000))})
					if err != nil {
						t.Fatal(err)
					}
					live[id] = true
				case k < 8 && len(live) > 0:
					id := pick(r, live, r.IntN(3) == 0)
					if err := s.Remove(id); err != nil {
						t.Fatal(err)
					}
					delete(live, id)
				case len(live) > 0:
					if err := s.Update(pick(r, live, false), r.IntN(9), time.Now()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n, err := s.Len(); err != nil || n != len(live) {
				t.Fatalf("round %d phase %d: Len %d (%v), want %d", round, phase, n, err, len(live))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		open(t, path).Close()

		raw := filepath.Join(t.TempDir(), fmt.Sprintf("raw-%d.db", round))
		db, err := bolt.Open(raw, 0o600, &bolt.Options{NoSync: true}) // bbolt's defaults: a synced freelist
		if err != nil {
			t.Fatal(err)
		}
		for range 30 {
			if err := db.Update(func(tx *bolt.Tx) error {
				for range 40 {
					top, err := tx.CreateBucketIfNotExists([]byte{byte('a' + r.IntN(4))})
					if err != nil {
						return err
					}
					b := top
					if r.IntN(2) == 0 {
						if b, err = top.CreateBucketIfNotExists([]byte{byte('A' + r.IntN(8))}); err != nil {
							return err
						}
					}
					key := make([]byte, 2+r.IntN(40)) // never a 1-byte bucket name
					for i := range key {
						key[i] = byte(r.IntN(256))
					}
					if r.IntN(3) == 0 {
						if c := b.Cursor(); c != nil {
							if k, v := c.First(); k != nil && v != nil { // not a nested bucket
								if err := b.Delete(k); err != nil {
									return err
								}
							}
						}
						continue
					}
					if err := b.Put(key, make([]byte, r.IntN(500)+r.IntN(2)*r.IntN(9000))); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		open(t, raw).Close()
	}
}

// pick returns a key of m: its smallest if lowest, else a random one.
func pick(r *rand.Rand, m map[uint64]bool, lowest bool) uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if lowest {
		return keys[0]
	}
	return keys[r.IntN(len(keys))]
}

// A directory, or a file that is not a bbolt file, is an error naming it.
func TestOpenNotAStore(t *testing.T) {
	dir := t.TempDir()
	if _, err := boltstore.Open(dir); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Open(a directory) = %v", err)
	}
	for name, data := range map[string][]byte{"short": []byte("not a database"), "text": []byte(strings.Repeat("not a database\n", 1000))} {
		path := filepath.Join(dir, name+".db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := boltstore.Open(path); !errors.Is(err, boltstore.ErrDamaged) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%s file) = %v; want ErrDamaged naming it", name, err)
		}
	}
}
