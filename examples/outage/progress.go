package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress output intervals.
const (
	ttyEvery   = 200 * time.Millisecond // a terminal line is rewritten in place
	plainEvery = time.Second            // otherwise a line is appended
)

// progress writes a live status line to stderr: the run, its phase and how
// long it has lasted, the subscriptions in place (at the embedded registry;
// with an external one, as the consumers' code believes), the listeners
// holding the right list, and the embedded registry's requests per second
// over the last second. On a terminal the line
// is rewritten in place (\r); otherwise a plain line is written every
// second and at each phase change. Without -v (quiet) it writes nothing but
// prompts. Safe for concurrent use; close stops its goroutine.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool // no -v: only prompt writes

	mu     sync.Mutex
	run    string
	name   string
	since  time.Time
	snap   func() state
	rate   func() (float64, bool)
	width  int // of the last terminal line
	closed bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newProgress returns a progress writing to w; with verbose false it writes
// only prompts.
func newProgress(w io.Writer, verbose bool) *progress {
	p := &progress{w: w, tty: isTerminal(w), quiet: !verbose, stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.done)
	if p.quiet {
		<-p.stop
		return
	}
	every := plainEvery
	if p.tty {
		every = ttyEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.print()
		}
	}
}

// phase starts a new phase of run m and prints it at once.
func (p *progress) phase(m mode, name string) {
	p.mu.Lock()
	p.run, p.name, p.since = m.String(), name, time.Now()
	p.mu.Unlock()
	p.print()
}

// track makes the status line show snap's counts and rate's requests/s.
func (p *progress) track(m mode, snap func() state, rate func() (float64, bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.run, p.snap, p.rate = m.String(), snap, rate
}

// untrack stops showing counts, and ends the terminal line.
func (p *progress) untrack() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snap, p.rate, p.name = nil, nil, ""
	p.endLineLocked()
}

// note writes a message on a line of its own (with -v only).
func (p *progress) note(format string, args ...any) {
	if p.quiet {
		return
	}
	p.prompt(format, args...)
}

// prompt writes a message on a line of its own, with or without -v: it
// asks the user to act (restart an external server) or says why the run
// cannot go on.
func (p *progress) prompt(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) endLineLocked() {
	if p.tty && p.width > 0 {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}

func (p *progress) print() {
	if p.quiet {
		return
	}
	p.mu.Lock()
	snap, rate := p.snap, p.rate
	run, name, since := p.run, p.name, p.since
	p.mu.Unlock()
	if name == "" {
		return
	}
	// Outside the lock: snap and rate read the scenario.
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %-13s %5.1fs", run, name, time.Since(since).Seconds())
	if snap != nil {
		st := snap()
		fmt.Fprintf(&b, "  in place %*d/%d  lists ok %*d/%d", digits(st.total), st.confirmed, st.total, digits(st.total), st.correct, st.total)
	}
	if rate != nil {
		if r, ok := rate(); ok {
			fmt.Fprintf(&b, "  %5.0f req/s", r)
		}
	}
	line := b.String()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

func digits(n int) int { return len(fmt.Sprint(n)) }

// close stops the progress goroutine and ends the terminal line. It is
// idempotent.
func (p *progress) close() {
	p.closeOnce.Do(func() {
		close(p.stop)
		<-p.done
		p.mu.Lock()
		defer p.mu.Unlock()
		p.endLineLocked()
		p.closed = true
	})
}
