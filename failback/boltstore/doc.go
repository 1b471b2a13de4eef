// Package boltstore is a failback.Store in one go.etcd.io/bbolt file: the
// calls a failback.Invoker has queued survive a crash or a restart.
//
//	st, err := boltstore.Open("/var/lib/app/failback.db")
//	...
//	defer st.Close() // after the Invoker's Close
//	inv, err := failback.New(dir, failback.WithStore(st, nil))
//
// Every change is durable when its method returns; concurrent changes share
// one fsync. Open checks an existing file first, so a truncated or damaged
// file is an error, not a crash. docs/failback-store-damage.md describes
// the file, its checks, and what to do when they fail.
package boltstore
