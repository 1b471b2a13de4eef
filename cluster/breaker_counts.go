package cluster

import "github.com/sony/gobreaker/v2"

// rollingCounts is gobreaker's rolling window of Counts (a bucket per
// BucketPeriod; one bucket without), ported from
// github.com/sony/gobreaker/v2 v2.4.0 (counter.go, MIT licence) because it
// is unexported there and breakerCore keeps gobreaker's Counts exactly
// (see breakerCore for why the state machine is not gobreaker's own).
type rollingCounts struct {
	gobreaker.Counts
	age     uint64
	buckets []gobreaker.Counts
}

func newRollingCounts(n int) rollingCounts {
	return rollingCounts{buckets: make([]gobreaker.Counts, max(n, 1))}
}

func (rc *rollingCounts) index(age uint64) uint64 { return age % uint64(len(rc.buckets)) }

// live reports whether an outcome of a call admitted at age still counts.
func (rc *rollingCounts) live(age uint64) bool {
	return age <= rc.age && rc.age-age < uint64(len(rc.buckets))
}

func (rc *rollingCounts) addRequests(n uint32) {
	rc.Requests += n
	rc.buckets[rc.index(rc.age)].Requests += n
}

func (rc *rollingCounts) addSuccesses(age uint64, n uint32) {
	if n == 0 || !rc.live(age) {
		return
	}
	for _, c := range []*gobreaker.Counts{&rc.Counts, &rc.buckets[rc.index(age)]} {
		c.TotalSuccesses += n
		c.ConsecutiveSuccesses += n
		c.ConsecutiveFailures = 0
	}
}

func (rc *rollingCounts) onFailure(age uint64) {
	if !rc.live(age) {
		return
	}
	for _, c := range []*gobreaker.Counts{&rc.Counts, &rc.buckets[rc.index(age)]} {
		c.TotalFailures++
		c.ConsecutiveFailures++
		c.ConsecutiveSuccesses = 0
	}
}

func (rc *rollingCounts) onExclusion(age uint64) {
	if rc.live(age) {
		rc.TotalExclusions++
		rc.buckets[rc.index(age)].TotalExclusions++
	}
}

// validRequests is gobreaker's: the requests whose outcome was not
// excluded (the half-open probes taken).
func (rc *rollingCounts) validRequests() uint32 {
	return rc.Requests - min(rc.Requests, rc.TotalExclusions)
}

func (rc *rollingCounts) clear() {
	rc.Counts = gobreaker.Counts{}
	rc.age = 0
	clear(rc.buckets)
}

// grow moves the window to age, dropping the buckets that fell out.
func (rc *rollingCounts) grow(age uint64) {
	if age <= rc.age {
		return
	}
	if age-rc.age >= uint64(len(rc.buckets)) {
		rc.clear()
		rc.age = age
		return
	}
	for rc.age < age {
		rc.age++
		cur := rc.index(rc.age)
		rc.subtract(cur)
		rc.buckets[cur] = gobreaker.Counts{}
	}
}

// subtract removes the oldest bucket from the totals, as gobreaker does:
// a consecutive run is shortened only when it spans every bucket.
func (rc *rollingCounts) subtract(oldest uint64) {
	b := rc.buckets[oldest]
	succ, fail := b.ConsecutiveSuccesses, b.ConsecutiveFailures
	for i := uint64(1); i < uint64(len(rc.buckets)); i++ {
		o := rc.buckets[(oldest+i)%uint64(len(rc.buckets))]
		succ += o.TotalSuccesses
		fail += o.TotalFailures
	}
	if rc.ConsecutiveSuccesses == succ {
		rc.ConsecutiveSuccesses -= min(rc.ConsecutiveSuccesses, b.ConsecutiveSuccesses)
	}
	if rc.ConsecutiveFailures == fail {
		rc.ConsecutiveFailures -= min(rc.ConsecutiveFailures, b.ConsecutiveFailures)
	}
	rc.Requests -= min(rc.Requests, b.Requests)
	rc.TotalSuccesses -= min(rc.TotalSuccesses, b.TotalSuccesses)
	rc.TotalFailures -= min(rc.TotalFailures, b.TotalFailures)
	rc.TotalExclusions -= min(rc.TotalExclusions, b.TotalExclusions)
}
