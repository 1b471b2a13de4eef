// Package subscribertest provides an in-memory subscriber.Registry for
// tests of code built on package subscriber (and of the Manager itself):
// it can be taken down and up, restarted with fresh state, made to fail,
// asked to break a subscription, and closed, and it counts the requests it
// receives.
//
// It never sleeps and starts no goroutine of its own, so it works inside
// testing/synctest bubbles.
package subscribertest
