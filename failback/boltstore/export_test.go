package boltstore

// Stats returns the commit counters, for the _test package.
func (s *Store) Stats() stats { return s.stats() }
