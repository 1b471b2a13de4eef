// Package observe serves what an example program shows of rebound while it
// runs: the status page (package statusz) at /debug/rebound and the
// OpenTelemetry metrics at /metrics in the Prometheus text format, through
// OTel's Prometheus exporter with a prometheus.Registry of its own (never
// the global one, where nacos-sdk-go's package init registers its own
// collectors).
//
//	o, err := observe.New()                 // the MeterProvider comes first ...
//	m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(o.MeterProvider())))
//	err = o.Serve("127.0.0.1:8080", os.Stdout, statusz.WithSubscriptions("nacos", m)) // ... then the page
//	defer o.Shutdown(ctx)
package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound/statusz"
)

// Paths of the two pages.
const (
	StatusPath  = "/debug/rebound"
	MetricsPath = "/metrics"
)

// Observer owns a MeterProvider exported to Prometheus and, after Serve,
// the HTTP server of the two pages.
type Observer struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	lis      net.Listener
	served   chan error
}

// New returns an Observer whose MeterProvider is read by a Prometheus
// exporter registered on a registry of its own.
func New() (*Observer, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("observe: prometheus exporter: %w", err)
	}
	return &Observer{registry: reg, provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))}, nil
}

// MeterProvider is what to give rebound's WithMeterProvider options.
func (o *Observer) MeterProvider() metric.MeterProvider { return o.provider }

// Serve starts serving, on addr (host:port; port 0 picks one), the status
// page built from opts at StatusPath and the metrics at MetricsPath, and
// prints both URLs to w (if not nil). It returns once the listener is open.
func (o *Observer) Serve(addr string, w io.Writer, opts ...statusz.Option) error {
	if o.srv != nil {
		return errors.New("observe: Serve called twice")
	}
	page, err := statusz.New(opts...)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(StatusPath, page)
	mux.Handle(MetricsPath, promhttp.HandlerFor(o.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, StatusPath, http.StatusFound)
	})
	o.lis, o.served = lis, make(chan error, 1)
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { o.served <- o.srv.Serve(lis) }()
	if w != nil {
		status, metrics := o.URLs()
		fmt.Fprintf(w, "status page: %s (%s?refresh=2 reloads it every 2 s)\nmetrics:     %s\n", status, status, metrics)
	}
	return nil
}

// URLs returns the addresses of the two pages ("" before Serve).
func (o *Observer) URLs() (status, metrics string) {
	if o.lis == nil {
		return "", ""
	}
	base := "http://" + o.lis.Addr().String()
	return base + StatusPath, base + MetricsPath
}

// Shutdown stops the server (if serving), waiting for requests in flight
// until ctx is done, then shuts the MeterProvider down.
func (o *Observer) Shutdown(ctx context.Context) error {
	var errs []error
	if o.srv != nil {
		errs = append(errs, o.srv.Shutdown(ctx))
		if err := <-o.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, o.provider.Shutdown(ctx))
	return errors.Join(errs...)
}
