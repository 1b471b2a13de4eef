package reboundpg

import (
	"context"
	"time"

	"github.com/rebound-go/rebound/failback"
)

// The Store's failback methods, called directly by the tests.
func (s *Store) Add(c failback.StoredCall) (uint64, error) { return s.s.Add(c) }
func (s *Store) Update(id uint64, attempts int, due time.Time) error {
	return s.s.Update(id, attempts, due)
}
func (s *Store) Remove(id uint64) error                        { return s.s.Remove(id) }
func (s *Store) Quarantine(id uint64, reason error) error      { return s.s.Quarantine(id, reason) }
func (s *Store) Load(fn func(failback.StoredCall) error) error { return s.s.Load(fn) }
func (s *Store) Notify() <-chan struct{}                       { return s.s.Notify() }
func (s *Store) Release(id uint64)                             { s.s.Release(id) }
func (s *Store) Claim(ctx context.Context, n int) ([]failback.StoredCall, time.Duration, error) {
	return s.s.Claim(ctx, n)
}

// WithBatch caps the calls one claim takes, for the _test package.
func WithBatch(n int) Option { return withBatch(n) }

// Options the package keeps at their defaults; the tests set them.
var (
	WithPollInterval = withPollInterval
	WithRetention    = withRetention
)
