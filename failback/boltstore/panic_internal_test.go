package boltstore

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound/failback"
)

// A panic of bbolt in a commit (damage the check at Open cannot see) ran
// on the committer goroutine, where nothing recovered it: the process
// died. It breaks the Store now: the commit's callers and every later call
// get an error wrapping ErrDamaged, naming the file.
func TestPanicInCommitBreaksTheStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(failback.StoredCall{Method: "m"}); err != nil {
		t.Fatal(err)
	}
	s.commitPanic = func() { panic("assertion failed: write: circular dependency occurred") }
	_, err = s.Add(failback.StoredCall{Method: "m"})
	if !errors.Is(err, ErrDamaged) || !errContains(err, path) || !errContains(err, "circular dependency") {
		t.Fatalf("Add during a panicking commit = %v; want ErrDamaged naming the file and the panic", err)
	}
	s.commitPanic = nil
	for name, err := range map[string]error{
		"Update":     s.Update(1, 2, time.Now()),
		"Remove":     s.Remove(1),
		"Load":       s.Load(func(failback.StoredCall) error { return nil }),
		"Len":        func() error { _, err := s.Len(); return err }(),
		"Quarantine": s.Quarantine(1, nil),
	} {
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("%s after the panic = %v; want ErrDamaged", name, err)
		}
	}
	if err := s.Close(); !errors.Is(err, ErrDamaged) {
		t.Errorf("Close = %v; want ErrDamaged", err)
	}
	// The panic was inside the transaction's function: bbolt rolled back
	// and released its lock, so the file can be closed here and reopened.
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Len(); n != 1 || err != nil {
		t.Fatalf("Len after reopening = %d, %v; want the 1 call committed before the panic", n, err)
	}
}

func errContains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// Close of a broken Store returned its ErrDamaged once, and nil from then
// on, as if a later Close had closed the file: every Close says the same.
func TestCloseOfABrokenStoreAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.commitPanic = func() { panic("assertion failed") }
	if _, err := s.Add(failback.StoredCall{Method: "m"}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Add = %v; want ErrDamaged", err)
	}
	for i := range 2 {
		if err := s.Close(); !errors.Is(err, ErrDamaged) {
			t.Errorf("Close #%d = %v; want ErrDamaged", i+1, err)
		}
	}
	if err := s.db.Close(); err != nil { // the panic rolled back: the file can be closed here
		t.Fatal(err)
	}
}
