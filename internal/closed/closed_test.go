package closed_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
)

func TestNewMatchesFamily(t *testing.T) {
	a := closed.New("pkg: thing closed")
	b := closed.New("pkg: thing closed")
	if !errors.Is(a, rebound.ErrClosed) {
		t.Fatal("closed sentinel does not match ErrClosed")
	}
	if errors.Is(a, b) {
		t.Fatal("two closed sentinels match each other")
	}
	if got := fmt.Errorf("op: %w", a).Error(); got != "op: pkg: thing closed" {
		t.Fatalf("text = %q", got)
	}
	if errors.Is(a, rebound.ErrInvalidArgument) {
		t.Fatal("closed sentinel matches ErrInvalidArgument")
	}
}
