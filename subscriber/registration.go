package subscriber

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Registration is the provider's side of service discovery, as Registry is
// the consumer's: one instance of a service kept registered in a service
// registry until it is stopped. Adapters create them (nacos.Register,
// etcd.Register): each makes the first registration itself and returns
// its error, then repairs the registration whenever the registry loses
// it (a restart, an expired lease, a rejected re-registration), until
// Shutdown or Close.
//
// Every method is safe for concurrent use.
type Registration interface {
	// Key returns the service the instance is registered under, as given
	// to the adapter's Register.
	Key() Key
	// Instance returns the instance as it is registered (the last
	// successful Update's instance, or Register's), with the fields the
	// adapter sets (Ephemeral) filled in. The caller may modify the
	// returned value: its Metadata map is a copy.
	Instance() Instance
	// Status returns a snapshot of the registration.
	Status() RegistrationStatus
	// Update changes the registered instance (weight, metadata, enabled,
	// healthy) and returns once the registry holds the new one, or the
	// error of the attempt (bounded by ctx): the registration then keeps
	// reporting and repairing the previous instance (the registry may
	// have received either; call Update again). The instance's identity (address, cluster,
	// and ID where the registry has one) must not change: that is another
	// instance, a *rebound.ArgumentError. Update after Shutdown or Close
	// returns an error matching rebound.ErrClosed.
	Update(ctx context.Context, inst Instance) error
	// Shutdown stops repairing and deregisters the instance; it returns
	// nil once the registry no longer lists it (as far as the adapter can
	// tell), or the error that prevented that (bounded by ctx). It is
	// idempotent and may follow Close.
	Shutdown(ctx context.Context) error
	// Close stops repairing, at once and without a request: the instance
	// stays registered until the registry drops it on its own (an etcd
	// lease expires, a Nacos client's connection closes). Close is
	// idempotent, leaves no goroutine behind and returns nil.
	io.Closer
}

// RegistrationState is the state of a Registration.
type RegistrationState int

const (
	// RegistrationRegistering: the first registration is in flight
	// (inside the adapter's Register).
	RegistrationRegistering RegistrationState = iota + 1
	// RegistrationRegistered: the registry accepted the registration and
	// the adapter knows of no reason to doubt that it holds it.
	RegistrationRegistered
	// RegistrationRepairing: the registry lost the registration, or may
	// have (a reconnect, a lost lease, a rejected re-registration), and
	// the adapter is checking or registering it again.
	RegistrationRepairing
	// RegistrationDeregistering: Shutdown is deregistering the instance.
	RegistrationDeregistering
	// RegistrationStopped: the registration ended (Shutdown, Close, or a
	// permanent error such as the client being closed; see
	// RegistrationStatus.LastErr).
	RegistrationStopped
)

func (s RegistrationState) String() string {
	switch s {
	case RegistrationRegistering:
		return "registering"
	case RegistrationRegistered:
		return "registered"
	case RegistrationRepairing:
		return "repairing"
	case RegistrationDeregistering:
		return "deregistering"
	case RegistrationStopped:
		return "stopped"
	}
	return fmt.Sprintf("RegistrationState(%d)", int(s))
}

// RegistrationStatus is a snapshot of a Registration.
type RegistrationStatus struct {
	// Registry names the adapter: "nacos" or "etcd".
	Registry string
	Key      Key
	Instance Instance
	State    RegistrationState
	// Since is when the registration entered State, a wall-clock time
	// (no monotonic reading).
	Since time.Time
	// Registrations counts the registrations the registry accepted, the
	// first included (for etcd: the leases granted with the key put on
	// them; for Nacos: the register requests the server accepted).
	Registrations int
	// Repairs counts the times the adapter found the registration lost
	// and restored it (for etcd: a key put back on a living lease; for
	// Nacos: a re-registration after the server was found not to list
	// the instance). A registration restored by the registry client on
	// its own (the Nacos SDK's redo) is not a repair.
	Repairs int
	// Attempts counts the failed attempts of the current repair (0 when
	// registered).
	Attempts int
	// LastErr is the error of the last failed attempt, kept after a
	// success for inspection; LastErrAt is when it happened (wall clock).
	LastErr   error
	LastErrAt time.Time
}

// RegistrationEvent is the Detail of a Registration's events: an
// EventStateChanged (From, To) or an EventAttempt (Op, Duration). The
// rebound.Event's Err is the change's reason or the attempt's error.
type RegistrationEvent struct {
	Registry string
	Key      Key
	At       time.Time
	From, To RegistrationState
	// Op is the request: "register" (the first, or a repair), "check"
	// (is it still registered?), "update" or "deregister".
	Op string
	// Duration is how long the request took.
	Duration time.Duration
}
