package regstate

import "sync"

// Loop runs a registration's work one step at a time: a connection
// event, a timer of a Sched, an Update. A step is posted by any
// goroutine; a goroutine is started for the steps posted and ends when
// none is left, so an idle registration costs no goroutine. It is safe
// for concurrent use. The zero Loop is usable (with no onEnd). Its
// steps run marked as its Tracker's work (Tracker.Enter).
type Loop struct {
	onEnd func()
	track *Tracker // nil: none

	mu      sync.Mutex
	queue   []func() bool
	active  bool          // a goroutine runs the steps
	stopped bool          // Stop was called, or a step returned false
	ended   bool          // end has run
	done    chan struct{} // made by the first Done
}

// NewLoop returns a Loop; onEnd runs once when it ends, with no step
// running and none to come. Its steps are t's work (t may be nil).
func NewLoop(onEnd func(), t *Tracker) *Loop {
	l := new(Loop)
	l.Init(onEnd, t)
	return l
}

// Init sets the zero l's onEnd and Tracker, as NewLoop does, for a Loop
// held by value. It must be called before any other method.
func (l *Loop) Init(onEnd func(), t *Tracker) { l.onEnd, l.track = onEnd, t }

// Post queues step; a step that returns false ends the loop (the steps
// still queued are dropped). Post reports false when the loop has ended
// or is ending (step will not run).
func (l *Loop) Post(step func() bool) bool {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	l.queue = append(l.queue, step)
	start := !l.active
	l.active = true
	l.mu.Unlock()
	if start {
		go l.run()
	}
	return true
}

// Do is Post for a short step that makes no request (a connection
// event): when no step is running it runs step on the caller's goroutine,
// and hands the steps queued meanwhile to a goroutine of their own. One
// goroutine can so tell many idle loops of an event without starting a
// goroutine for each. It reports false when the loop has ended or is
// ending.
func (l *Loop) Do(step func() bool) bool {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	if l.active {
		l.queue = append(l.queue, step)
		l.mu.Unlock()
		return true
	}
	l.active = true
	l.mu.Unlock()
	ok := l.step(step)
	l.mu.Lock()
	if !ok {
		l.stopped = true
	}
	switch {
	case l.stopped:
		l.mu.Unlock()
		l.end()
	case len(l.queue) > 0:
		l.mu.Unlock()
		go l.run()
	default:
		l.active = false
		l.mu.Unlock()
	}
	return true
}

// Stop ends the loop after the step running, if any; Done is closed when
// it has ended. It is idempotent.
func (l *Loop) Stop() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.stopped = true
	idle := !l.active
	l.mu.Unlock()
	if idle {
		l.end()
	}
}

// Done is closed when the loop has ended.
func (l *Loop) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		if l.ended {
			return closedChan
		}
		l.done = make(chan struct{}) // made when waited for: an idle loop keeps none
	}
	return l.done
}

// closedChan is the Done of a loop that ended before its first Done.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (l *Loop) end() {
	l.mu.Lock()
	clear(l.queue)
	l.queue = nil
	l.mu.Unlock()
	if l.onEnd != nil {
		l.onEnd()
	}
	l.mu.Lock()
	l.ended = true
	done := l.done
	l.mu.Unlock()
	if done != nil {
		close(done)
	}
}

func (l *Loop) run() {
	for {
		l.mu.Lock()
		if l.stopped {
			l.mu.Unlock()
			l.end()
			return
		}
		if len(l.queue) == 0 {
			l.active = false
			l.mu.Unlock()
			return
		}
		step := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.mu.Unlock()
		if !l.step(step) {
			l.mu.Lock()
			l.stopped = true
			l.mu.Unlock()
		}
	}
}

// step runs f marked as the Tracker's work.
func (l *Loop) step(f func() bool) bool {
	in := l.track.Enter()
	defer l.track.Leave(in)
	return f()
}
