// Package subscriber keeps a service's registry subscriptions alive. It
// subscribes until the registry acknowledges, confirms again after a
// reconnect, and delivers each list change once, in order.
//
// # Consumers
//
// A Manager (New) runs subscriptions through a Registry adapter:
// subscriber/nacos, subscriber/etcd, or subscribertest in tests.
// Manager.Subscribe calls a listener with each new list. A WatchGroup hands
// out Views instead: every View of one key shares one subscription.
// Retries are paced by the engine and never give up on a transient error.
// A listener keeps its last list through outages. The full model:
// docs/subscription.md; views: docs/watch.md.
//
// # Providers
//
// Registration is the provider's side: one instance kept registered until
// Shutdown (deregister, confirmed) or Close (stop repairing), with the
// states of RegistrationState and a RegistrationStatus; its events go to a
// rebound.Observer.
// nacos.Register and etcd.Register implement it, and both pass
// subscribertest.RunRegistration. Drain stops a provider in the order that
// fails no call: deregister, wait, stop serving.
//
// # Writing an adapter
//
// Implement Registry; add ConnectionMonitor or Reconciler if the client
// can. An adapter makes one attempt per call and never retries. The
// contract in full: docs/subscription.md.
package subscriber
