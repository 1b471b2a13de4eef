package boltstore

// Stats returns the commit counters, for the _test package.
func (s *Store) Stats() stats { return s.stats() }

// WithNoSync skips the fsync of every commit, for tests and benchmarks.
func WithNoSync() Option { return withNoSync() }

// ErrDamaged is wrapped by the errors about a damaged file, for the tests.
var ErrDamaged = errDamaged

// Len returns the number of stored calls, for the tests.
func (s *Store) Len() (int, error) { return s.count() }
