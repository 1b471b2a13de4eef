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

	"github.com/rebound-go/rebound/internal/telemetry"
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
	// Sets: metric name -> the attribute set of each data point.
	Sets map[string][]attribute.Set
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
	s := Snapshot{Values: map[string]map[string]int64{}, Units: map[string]string{}, Scopes: map[string]string{}, Sets: map[string][]attribute.Set{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			s.Units[m.Name] = m.Unit
			s.Scopes[m.Name] = sm.Scope.Name
			vals := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
					s.Sets[m.Name] = append(s.Sets[m.Name], p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(attribute.DefaultEncoder())] = int64(p.Count)
					s.Sets[m.Name] = append(s.Sets[m.Name], p.Attributes)
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

// CheckValues reports a test error for every data point of s whose
// instrument is not in telemetry.Values, or whose attribute key or value is
// not in that instrument's fixed set (bounded cardinality: free text must
// never become an attribute value). It returns the number of data points
// checked.
func CheckValues(t testing.TB, s Snapshot) int {
	t.Helper()
	allowed := telemetry.Values()
	n := 0
	for name, sets := range s.Sets {
		keys, ok := allowed[name]
		if !ok {
			t.Errorf("%s: an instrument missing from telemetry.Values", name)
			continue
		}
		for _, set := range sets {
			n++
			for _, kv := range set.ToSlice() {
				vals, ok := keys[string(kv.Key)]
				if !ok {
					t.Errorf("%s: attribute %s is not in its documented set", name, kv.Key)
					continue
				}
				found := false
				for _, v := range vals {
					found = found || v == kv.Value.String()
				}
				if !found {
					t.Errorf("%s: %s=%q is not one of the documented values %q", name, kv.Key, kv.Value.String(), vals)
				}
			}
		}
	}
	return n
}
