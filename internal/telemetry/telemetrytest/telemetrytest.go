// Package telemetrytest reads what an OpenTelemetry ManualReader collected,
// for the tests of rebound's packages: one shape (name -> attribute set ->
// value) that every metrics test asserts on.
package telemetrytest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// NewProvider returns a ManualReader and a MeterProvider that reports to it.
func NewProvider() (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	return r, sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
}

// Snapshot is one collection.
type Snapshot struct {
	// Values: metric name -> encoded attribute set
	// (attribute.DefaultEncoder, "" for none) -> value: int64 sums (counters,
	// up-down counters, their observable forms) as their value, float64
	// histograms as their count.
	Values map[string]map[string]int64
	Units  map[string]string // metric name -> unit
	Scopes map[string]string // metric name -> instrumentation scope name
}

// Read collects r. A collection error is fatal; data of any other type than
// an int64 sum or a float64 histogram is a test error (rebound records no
// other).
func Read(t testing.TB, r *sdkmetric.ManualReader) Snapshot {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	s := Snapshot{Values: map[string]map[string]int64{}, Units: map[string]string{}, Scopes: map[string]string{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			s.Units[m.Name] = m.Unit
			s.Scopes[m.Name] = sm.Scope.Name
			vals := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(attribute.DefaultEncoder())] = int64(p.Count)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
			s.Values[m.Name] = vals
		}
	}
	return s
}

// Collect is Read(t, r).Values.
func Collect(t testing.TB, r *sdkmetric.ManualReader) map[string]map[string]int64 {
	t.Helper()
	return Read(t, r).Values
}
