// Package subscribertest helps test registry adapters and code built on
// package subscriber.
//
// Registry (New) is an in-memory subscriber.Registry: it can be taken down
// and up, restarted with fresh state, made to fail, asked to break a
// subscription, and closed, and it counts the requests it receives. It
// never sleeps and starts no goroutine of its own, so it works inside
// testing/synctest bubbles.
//
// Run is a conformance suite: given a Harness that creates an adapter and
// can register instances and stop, start and restart the registry behind
// it, it runs the same behavioural tests through a subscriber.Manager
// against any subscriber.Registry implementation (delivery, cluster
// filtering, registry down at start, restart, flapping, exactly-once
// delivery, unsubscribe, registry closed, and Close without leaks). The
// project runs it against this package's Registry, the Nacos adapter with
// subscriber/nacos/nacostest, and the etcd adapter with embedded etcd.
package subscribertest
