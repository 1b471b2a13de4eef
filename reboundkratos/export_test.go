package reboundkratos

import "github.com/rebound-go/rebound/subscriber"

// ViewStats returns the counters of d's Views: Keys is the names d holds,
// Views its open Views, Subscribes and Unsubscribes the key shares taken
// and let go.
func ViewStats(d *Discovery) subscriber.WatchGroupStats { return d.views.Stats() }

// Watchers returns the number of d's watchers not stopped.
func Watchers(d *Discovery) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.watchers)
}

// Options and names the package does not export; the tests use them.
var (
	WithGroup         = withGroup
	WithKind          = withKind
	WithMaxPending    = withMaxPending
	WithCluster       = withCluster
	WithWeight        = withWeight
	ErrWatcherStopped = errWatcherStopped
)

// FormatName returns "nacos" or "etcd".
func FormatName(f Format) string { return f.name() }
