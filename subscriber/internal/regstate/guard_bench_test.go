package regstate

import (
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// BenchmarkLoopDo measures a step run in place by Loop.Do: with no
// Tracker (the baseline), with a Tracker without observers (nothing is
// marked), and with one with an observer (the step is marked as the
// registration's work, which reads the goroutine's id).
func BenchmarkLoopDo(b *testing.B) {
	key, in := subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}
	obs := []rebound.Observer{rebound.ObserverFunc(func(rebound.Event) {})}
	for _, bc := range []struct {
		name string
		t    *Tracker
	}{
		{"no tracker", nil},
		{"no observers", New("test", key, in, nil, nil)},
		{"observed", New("test", key, in, obs, nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := NewLoop(nil, bc.t)
			step := func() bool { return true }
			b.ReportAllocs()
			for b.Loop() {
				l.Do(step)
			}
		})
	}
}
