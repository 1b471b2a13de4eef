package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names of package reboundgrpc (see the table in the package
// documentation).
const (
	GRPCSubscriptions = "rebound.grpc.subscriptions"
	GRPCResolvers     = "rebound.grpc.resolvers"
	GRPCResolveNow    = "rebound.grpc.resolve_now"
	GRPCRejected      = "rebound.grpc.rejected_states"
)

// GRPCStats is what a reboundgrpc.Builder reports when the reader
// collects.
type GRPCStats struct {
	Subscriptions, Resolvers int64
	ResolveNows, Refreshes   int64
	Rejected                 int64
}

// GRPC reports a reboundgrpc.Builder's instruments, all observable: the
// resolver's paths record nothing. A nil *GRPC does nothing.
type GRPC struct{ reg metric.Registration }

// NewGRPC registers the rebound.grpc.* instruments on mp's rebound meter;
// stats is called each time the reader collects. A nil mp returns nil,
// nil.
func NewGRPC(mp metric.MeterProvider, stats func() GRPCStats) (*GRPC, error) {
	if mp == nil {
		return nil, nil
	}
	m := meter(mp)
	subs, err := m.Int64ObservableUpDownCounter(GRPCSubscriptions, metric.WithUnit("{subscription}"),
		metric.WithDescription("Manager subscriptions the gRPC resolver holds (one per target in use or lingering)."))
	if err != nil {
		return nil, err
	}
	res, err := m.Int64ObservableUpDownCounter(GRPCResolvers, metric.WithUnit("{resolver}"),
		metric.WithDescription("Open gRPC resolvers (one per ClientConn out of idle mode)."))
	if err != nil {
		return nil, err
	}
	rn, err := m.Int64ObservableCounter(GRPCResolveNow, metric.WithUnit("{call}"),
		metric.WithDescription("ResolveNow calls, by result: refreshed (a re-confirmation was asked for) or coalesced."))
	if err != nil {
		return nil, err
	}
	rej, err := m.Int64ObservableCounter(GRPCRejected, metric.WithUnit("{state}"),
		metric.WithDescription("Resolver states a ClientConn rejected, each sent again with backoff."))
	if err != nil {
		return nil, err
	}
	refreshed := metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrResult, ResolveRefreshed)))
	coalesced := metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrResult, ResolveCoalesced)))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := stats()
		o.ObserveInt64(subs, st.Subscriptions)
		o.ObserveInt64(res, st.Resolvers)
		o.ObserveInt64(rn, st.Refreshes, refreshed)
		o.ObserveInt64(rn, max(st.ResolveNows-st.Refreshes, 0), coalesced)
		o.ObserveInt64(rej, st.Rejected)
		return nil
	}, subs, res, rn, rej)
	if err != nil {
		return nil, err
	}
	return &GRPC{reg: reg}, nil
}

// Close unregisters the callback.
func (g *GRPC) Close() error {
	if g == nil || g.reg == nil {
		return nil
	}
	return g.reg.Unregister()
}
