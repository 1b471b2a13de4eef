// Package boltstore is a failback.Store on go.etcd.io/bbolt: the calls a
// failback.Invoker has queued, in one file, so that they survive a crash
// or a restart of the process.
//
//	st, err := boltstore.Open("/var/lib/app/failback.db")
//	...
//	defer st.Close() // after the Invoker's Close
//	inv, err := failback.New(dir, failback.WithStore(st))
//
// # Durability and group commit
//
// Every change (a call queued, retried or ended) is durable when its method
// returns: it is written in a bbolt read-write transaction whose commit
// fsyncs the file (fdatasync on Linux). Concurrent changes share one
// transaction: one committer goroutine writes, in one commit, every change
// submitted while the previous commit was running, so the cost of an fsync
// is spread over all the callers waiting for it. There is no timer and no
// added delay: a lone caller waits for one commit, a crowd of callers
// waits for at most two and each commit carries them all.
//
// # Records
//
// One bucket, keyed by the call's ID (8 bytes, big endian, assigned in
// increasing order), holds a compact binary record per call: version,
// attempts, next due time and first-failure time (wall clock, Unix
// nanoseconds), method, attachments and the arguments as encoded by the
// Invoker's failback.Codec. An Update rewrites the record in place; Remove
// deletes it.
//
// # Damaged files and records
//
// bbolt trusts its file: a truncated one (a half-written copy, a full
// disk) makes it fault with SIGBUS, a damaged page makes it panic on a
// goroutine of its own, and either kills the process. So Open checks an
// existing file before bbolt uses it read-write (holding bbolt's shared
// lock, with bounds-checked reads of every page in use, once per Open:
// for 100,000 stored calls, a 34 MB file, about 10 ms on top of bbolt's own
// 30 ms, less than the Load that follows; BenchmarkReload/Open) and
// returns an error naming the file and wrapping ErrDamaged instead: move
// the file aside to start afresh, or restore a copy. An empty file is a
// new store. Should bbolt still panic in a commit (damage the check
// cannot see), the committer recovers it: the Store breaks, and its
// methods return an error wrapping ErrDamaged, instead of the process
// dying.
//
// A record whose pages are sound but whose bytes cannot be decoded is
// reported by Load to its caller (failback.StoredCall.Err, wrapping
// ErrDamaged, naming the file, the bucket and the key). failback.New fails
// on it by default; with failback.WithQuarantine it calls Quarantine, which
// moves the record, bytes unchanged, to the bucket "failback-quarantine"
// of the same file (inspect it with bbolt's command-line tool) and counts
// it in Stats.Quarantined.
//
// Every method of a closed Store returns an error matching
// rebound.ErrClosed.
//
// The file is locked while open: a second Open of the same file, in this
// process or another, waits for the lock (WithOpenTimeout).
package boltstore
