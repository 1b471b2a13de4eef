package subscriber

import (
	"math"
	"testing"
)

// A NaN weight equals itself for deduplication, so that a provider that
// publishes one does not make every push look changed (issue 14 item 9).
func TestSameInstancesNaNWeight(t *testing.T) {
	a := []Instance{{IP: "10.0.0.1", Port: 80, Weight: math.NaN()}}
	b := []Instance{{IP: "10.0.0.1", Port: 80, Weight: math.NaN()}}
	if !sameInstances(a, b) {
		t.Fatal("two lists with the same NaN weight differ")
	}
	b[0].Weight = 1
	if sameInstances(a, b) {
		t.Fatal("NaN and 1 are the same weight")
	}
}
