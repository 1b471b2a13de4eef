package goid_test

import (
	"testing"

	"github.com/rebound-go/rebound/internal/goid"
)

func TestIDIsPerGoroutine(t *testing.T) {
	here := goid.ID()
	if here == 0 {
		t.Fatal("ID() = 0")
	}
	if again := goid.ID(); again != here {
		t.Fatalf("ID() changed on one goroutine: %d then %d", here, again)
	}
	other := make(chan uint64)
	go func() { other <- goid.ID() }()
	if o := <-other; o == here || o == 0 {
		t.Fatalf("another goroutine got %d, this one %d", o, here)
	}
}
