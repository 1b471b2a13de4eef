package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names of the provider side (subscriber.Registration
// adapters; see the table in the package documentation).
const (
	RegistrationRegistrations = "rebound.registration.registrations"
	RegistrationRequests      = "rebound.registration.requests"
	RegistrationRepairs       = "rebound.registration.repairs"
)

// RegistrationStateNames are the attribute values of state, in the order
// of subscriber.RegistrationState, registering to stopped.
var RegistrationStateNames = [5]string{"registering", "registered", "repairing", "deregistering", "stopped"}

// RegistrationOpNames are the attribute values of op, in the order of
// RegistrationStats.Requests.
var RegistrationOpNames = [4]string{"register", "check", "update", "deregister"}

// RegistrationStats is what one Registration reports when the reader
// collects.
type RegistrationStats struct {
	// State is the index of its state in RegistrationStateNames; -1
	// reports none.
	State int
	// Requests counts its requests by op (RegistrationOpNames) and result
	// (0 success, 1 failure).
	Requests [4][2]int64
	// Repairs counts its repairs.
	Repairs int64
}

// Registration reports one Registration's instruments, all observable:
// the registration records nothing on its paths. A nil *Registration does
// nothing.
type Registration struct{ reg metric.Registration }

// NewRegistration registers the rebound.registration.* instruments on
// mp's rebound meter with the attribute registry (the adapter's name);
// stats is called each time the reader collects. A nil mp returns nil,
// nil.
func NewRegistration(mp metric.MeterProvider, registry string, stats func() RegistrationStats) (*Registration, error) {
	if mp == nil {
		return nil, nil
	}
	m := meter(mp)
	regs, err := m.Int64ObservableUpDownCounter(RegistrationRegistrations, metric.WithUnit("{registration}"),
		metric.WithDescription("Registrations by state: registering, registered, repairing, deregistering (1 per Registration; a stopped one is no longer reported)."))
	if err != nil {
		return nil, err
	}
	reqs, err := m.Int64ObservableCounter(RegistrationRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests of registrations to the registry, by op (register, check, update, deregister) and result (success, failure)."))
	if err != nil {
		return nil, err
	}
	reps, err := m.Int64ObservableCounter(RegistrationRepairs, metric.WithUnit("{repair}"),
		metric.WithDescription("Registrations the adapter found lost and restored."))
	if err != nil {
		return nil, err
	}
	r := attribute.String("registry", registry)
	var states [len(RegistrationStateNames)]metric.ObserveOption
	for i, n := range RegistrationStateNames {
		states[i] = metric.WithAttributeSet(attribute.NewSet(r, attribute.String("state", n)))
	}
	var ops [len(RegistrationOpNames)][2]metric.ObserveOption
	for i, n := range RegistrationOpNames {
		for j, res := range []string{"success", "failure"} {
			ops[i][j] = metric.WithAttributeSet(attribute.NewSet(r, attribute.String("op", n), attribute.String("result", res)))
		}
	}
	plain := metric.WithAttributeSet(attribute.NewSet(r))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := stats()
		for i := range states {
			v := int64(0)
			if st.State == i {
				v = 1
			}
			o.ObserveInt64(regs, v, states[i])
		}
		for i := range ops {
			for j := range 2 {
				o.ObserveInt64(reqs, st.Requests[i][j], ops[i][j])
			}
		}
		o.ObserveInt64(reps, st.Repairs, plain)
		return nil
	}, regs, reqs, reps)
	if err != nil {
		return nil, err
	}
	return &Registration{reg: reg}, nil
}

// Close unregisters the callback.
func (g *Registration) Close() error {
	if g == nil || g.reg == nil {
		return nil
	}
	return g.reg.Unregister()
}
