package statusz

// The JSON page's model, under the names the _test package reads it by.
type (
	Page         = jsonPage
	Subscription = subscriptionRow
	BreakerRow   = breakerRow
)

// Events returns the events l kept, newest first, and how many it observed.
func (l *EventLog) Events() ([]eventRow, uint64) { return l.snapshot() }

// WithPageSize sets the rows of an HTML page, for the _test package.
func WithPageSize(n int) Option { return withPageSize(n) }
