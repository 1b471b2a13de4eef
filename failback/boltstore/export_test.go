package boltstore

// Stats returns the commit counters, for the _test package.
func (s *Store) Stats() stats { return s.stats() }

// WithNoSync skips the fsync of every commit, for tests and benchmarks.
func WithNoSync() Option { return withNoSync() }
