package main

import (
	"sync/atomic"
	"time"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// bucket is the resolution of the request meter. Peaks are measured over
// any window of bucketsPerWindow consecutive buckets (a sliding 100 ms
// window); the plot sums them into fixed 100 ms windows.
const (
	bucket           = 10 * time.Millisecond
	window           = 100 * time.Millisecond
	bucketsPerWindow = int(window / bucket)
)

// series counts events per bucket since a start time. add is lock-free and
// safe for concurrent use; reads are snapshots.
type series struct {
	start time.Time
	n     []atomic.Int64
}

func newSeries(start time.Time, span time.Duration) *series {
	return &series{start: start, n: make([]atomic.Int64, int(span/bucket)+1)}
}

// index is the bucket of t, clamped to the series.
func (s *series) index(t time.Time) int {
	i := int(t.Sub(s.start) / bucket)
	return min(max(i, 0), len(s.n)-1)
}

func (s *series) add(t time.Time) { s.n[s.index(t)].Add(1) }

// end is the index of the first bucket at or after t, at most len(s.n).
func (s *series) end(t time.Time) int {
	return min(max(int(t.Sub(s.start)/bucket), 0), len(s.n))
}

// sum counts the events in the buckets from from's to the one before to's.
func (s *series) sum(from, to time.Time) int64 {
	var total int64
	for i := s.index(from); i < s.end(to); i++ {
		total += s.n[i].Load()
	}
	return total
}

// peak is the largest count in any window of bucketsPerWindow consecutive
// buckets that starts in [from, to).
func (s *series) peak(from, to time.Time) int64 {
	var best int64
	end := s.end(to)
	for i := s.index(from); i < end; i++ {
		var w int64
		for j := i; j < min(i+bucketsPerWindow, len(s.n)); j++ {
			w += s.n[j].Load()
		}
		best = max(best, w)
	}
	return best
}

// windows returns the counts per fixed 100 ms window from from to to, the
// first window starting at from.
func (s *series) windows(from, to time.Time) []int64 {
	var out []int64
	for t := from; t.Before(to); t = t.Add(window) {
		out = append(out, s.sum(t, t.Add(window)))
	}
	return out
}

// meter counts the requests an embedded registry receives (all of them,
// SubscribeServiceRequests and InstanceRequests), fed by nacostest.WithRequestHook.
type meter struct {
	all, subscribe, register *series
}

func newMeter(start time.Time, span time.Duration) *meter {
	return &meter{all: newSeries(start, span), subscribe: newSeries(start, span), register: newSeries(start, span)}
}

// request records one request of type typ.
func (m *meter) request(typ string) {
	now := time.Now()
	m.all.add(now)
	switch typ {
	case nacostest.RequestSubscribeService:
		m.subscribe.add(now)
	case nacostest.RequestInstance:
		m.register.add(now)
	}
}
