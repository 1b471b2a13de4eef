package rebound_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rebound-go/rebound"
)

func TestArgumentError(t *testing.T) {
	cause := errors.New("cause")
	err := error(&rebound.ArgumentError{Func: "pkg.New", Arg: "WithX", Reason: "must be > 0", Err: cause})
	if !errors.Is(err, rebound.ErrInvalidArgument) || !errors.Is(err, cause) {
		t.Fatalf("errors.Is fails on %v", err)
	}
	if got, want := err.Error(), "pkg.New: WithX must be > 0: cause"; got != want {
		t.Fatalf("text = %q, want %q", got, want)
	}
	plain := &rebound.ArgumentError{Func: "pkg.New", Arg: "x", Reason: "is nil"}
	if got := plain.Error(); got != "pkg.New: x is nil" {
		t.Fatalf("text = %q", got)
	}
}

func TestTransient(t *testing.T) {
	if rebound.Transient(nil) != nil {
		t.Fatal("Transient(nil) != nil")
	}
	base := errors.New("busy")
	err := fmt.Errorf("call: %w", rebound.Transient(base))
	if !rebound.IsTransient(err) || !errors.Is(err, base) {
		t.Fatalf("IsTransient/Is fail on %v", err)
	}
	if rebound.IsTransient(base) {
		t.Fatal("unmarked error is transient")
	}
	if err.Error() != "call: busy" {
		t.Fatalf("text = %q", err.Error())
	}
}
