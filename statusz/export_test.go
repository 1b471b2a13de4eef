package statusz

import (
	"time"

	"github.com/rebound-go/rebound"
)

// NewEventLog returns an EventLog keeping the last size events (0: 100);
// a negative size is an *rebound.ArgumentError.
func NewEventLog(size int) (*EventLog, error) {
	if size < 0 {
		return nil, &rebound.ArgumentError{Func: "statusz.NewEventLog", Arg: "size", Reason: "must not be negative", Err: rebound.ErrInvalidArgument}
	}
	return &EventLog{now: time.Now, size: size}, nil
}

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
