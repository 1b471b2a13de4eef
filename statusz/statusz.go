package statusz

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/internal/nilness"
	"github.com/rebound-go/rebound/subscriber"
)

// defaultPageSize is the number of subscriptions an HTML page shows.
const defaultPageSize = 100

// statusSource lists subscriptions: *subscriber.Manager is one.
type statusSource = interface{ Status() []subscriber.Status }

// connSource is the optional method of a statusSource that reports the
// registry connection (*subscriber.Manager has it).
type connSource interface {
	Connected() (connected, reported bool)
}

// statsSource reports a failback invoker's counters: *failback.Invoker
// is one.
type statsSource = interface{ Stats() failback.Stats }

// breakerSource lists the circuit breakers that are not closed:
// *cluster.BreakerDirectory is one.
type breakerSource = interface {
	Open() []cluster.BreakerStatus
}

// An Option configures New. A nil Option is ignored.
type Option interface{ apply(*handler) error }

type optionFunc func(*handler) error

func (f optionFunc) apply(h *handler) error { return f(h) }

// WithSubscriptions adds a section listing the subscriptions of src, a
// *subscriber.Manager, under name; its registry connection is shown too.
// Names must be unique and not empty; src must not be nil.
func WithSubscriptions(name string, src interface{ Status() []subscriber.Status }) Option {
	return optionFunc(func(h *handler) error {
		if err := h.checkName("statusz.WithSubscriptions", name, nilness.Is(src)); err != nil {
			return err
		}
		h.subs = append(h.subs, namedSubs{name, src})
		return nil
	})
}

// WithFailback adds a section showing the counters of src, a
// *failback.Invoker, under name. Names must be unique and not empty; src
// must not be nil.
func WithFailback(name string, src interface{ Stats() failback.Stats }) Option {
	return optionFunc(func(h *handler) error {
		if err := h.checkName("statusz.WithFailback", name, nilness.Is(src)); err != nil {
			return err
		}
		h.fbs = append(h.fbs, namedStats{name, src})
		return nil
	})
}

// WithRegistrations adds a section showing the Status of regs under name.
// Nil entries are skipped; the name must be unique and not empty.
func WithRegistrations(name string, regs ...subscriber.Registration) Option {
	return optionFunc(func(h *handler) error {
		if err := h.checkName("statusz.WithRegistrations", name, false); err != nil {
			return err
		}
		h.regs = append(h.regs, namedRegs{name, slices.Clone(regs)})
		return nil
	})
}

// WithBreakers adds the breakers of src, a *cluster.BreakerDirectory,
// that are not closed: in the WithFailback section of name, or in a
// section of their own. src must not be nil.
func WithBreakers(name string, src interface {
	Open() []cluster.BreakerStatus
}) Option {
	return optionFunc(func(h *handler) error {
		const fn = "statusz.WithBreakers"
		switch {
		case nilness.Is(src):
			return &rebound.ArgumentError{Func: fn, Arg: "src", Reason: "must not be nil", Err: rebound.ErrInvalidArgument}
		case strings.TrimSpace(name) == "":
			return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: "must not be empty", Err: rebound.ErrInvalidArgument}
		}
		for _, nb := range h.brks {
			if nb.name == name {
				return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: fmt.Sprintf("%q is used twice", name), Err: rebound.ErrInvalidArgument}
			}
		}
		h.brks = append(h.brks, namedBreakers{name, src})
		return nil
	})
}

// WithEvents adds a section listing the events log kept, newest first.
// Names must be unique and not empty; log must not be nil.
func WithEvents(name string, log *EventLog) Option {
	return optionFunc(func(h *handler) error {
		if err := h.checkName("statusz.WithEvents", name, log == nil); err != nil {
			if ae, ok := err.(*rebound.ArgumentError); ok && ae.Arg == "src" {
				ae.Arg = "log"
			}
			return err
		}
		h.evs = append(h.evs, namedEvents{name, log})
		return nil
	})
}

// withPageSize sets how many subscriptions an HTML page shows (default
// 100); a request's limit parameter overrides it.
func withPageSize(n int) Option {
	return optionFunc(func(h *handler) error {
		if n < 1 {
			return &rebound.ArgumentError{Func: "statusz.withPageSize", Arg: "n", Reason: "must be at least 1", Err: rebound.ErrInvalidArgument}
		}
		h.pageSize = n
		return nil
	})
}

type namedSubs struct {
	name string
	src  statusSource
}

type namedStats struct {
	name string
	src  statsSource
}

type namedBreakers struct {
	name string
	src  breakerSource
}

type namedEvents struct {
	name string
	log  *EventLog
}

type namedRegs struct {
	name string
	regs []subscriber.Registration
}

// handler serves the status page; each request reads its sources afresh.
type handler struct {
	subs     []namedSubs
	fbs      []namedStats
	regs     []namedRegs
	brks     []namedBreakers
	evs      []namedEvents
	names    map[string]bool
	pageSize int
	now      func() time.Time
}

var _ http.Handler = (*handler)(nil)

// New returns the handler of a page showing the given sources, safe for
// concurrent use. GET and HEAD serve HTML, or JSON for format=json or an
// Accept header preferring application/json (docs/statusz.md).
func New(opts ...Option) (http.Handler, error) {
	h := &handler{pageSize: defaultPageSize, names: map[string]bool{}, now: time.Now}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(h); err != nil {
			return nil, err
		}
	}
	// A breaker source goes in the failback section of its name, or gets
	// a section of its own under a name no other section uses.
	fbNames := map[string]bool{}
	for _, nf := range h.fbs {
		fbNames[nf.name] = true
	}
	for _, nb := range h.brks {
		if fbNames[nb.name] {
			continue
		}
		if h.names[nb.name] {
			return nil, &rebound.ArgumentError{Func: "statusz.WithBreakers", Arg: "name",
				Reason: fmt.Sprintf("%q is used twice (only a WithFailback section may share a name with WithBreakers)", nb.name), Err: rebound.ErrInvalidArgument}
		}
		h.names[nb.name] = true
	}
	return h, nil
}

func (h *handler) checkName(fn, name string, nilSrc bool) error {
	switch {
	case nilSrc:
		return &rebound.ArgumentError{Func: fn, Arg: "src", Reason: "must not be nil", Err: rebound.ErrInvalidArgument}
	case strings.TrimSpace(name) == "":
		return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: "must not be empty", Err: rebound.ErrInvalidArgument}
	case h.names[name]:
		return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: fmt.Sprintf("%q is used twice", name), Err: rebound.ErrInvalidArgument}
	}
	h.names[name] = true
	return nil
}

// ServeHTTP serves the page; see New.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	jsonOut := wantsJSON(r)
	q, err := parseQuery(r, jsonOut, h.pageSize)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := h.snapshot(q)
	w.Header().Set("Cache-Control", "no-store")
	if jsonOut {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, htmlData{jsonPage: p, q: q})
}

func wantsJSON(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "json"
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch mt {
		case "application/json":
			return true
		case "text/html", "application/xhtml+xml":
			return false
		}
	}
	return false
}
