package rebound

// The emitters allocate nothing and call no interface method: an Event is
// passed by value to the functions compiled for its kind (fan), the meter's
// (WithMeterProvider) first.

// compileObservers builds c.fan from the meter and the observers, once,
// when the options are compiled.
func (c *config) compileObservers() {
	all := c.observers
	if c.meter != nil {
		all = append([]*listeners{&c.meter.on}, all...)
	}
	n := 0
	for _, l := range all {
		for _, f := range l {
			if f != nil {
				n++
			}
		}
	}
	c.observers, c.listening = nil, n > 0
	if n == 0 {
		return
	}
	fns := make([]func(Event), 0, n)
	for k := EventRetry; k < numLoopKinds; k++ {
		from := len(fns)
		for _, l := range all {
			if l[k] != nil {
				fns = append(fns, l[k])
			}
		}
		c.fan[k] = fns[from:len(fns):len(fns)]
	}
}

func (c *config) observed() bool { return c.listening }

func (c *config) emit(e Event) {
	for _, f := range c.fan[e.Kind] {
		f(e)
	}
}
func (c *config) emitAttempted(e Event) {
	e.Kind = EventAttempt
	c.emit(e)
}

func (c *config) emitRetried(e Event) {
	e.Kind = EventRetry
	c.emit(e)
}

func (c *config) emitRecovered(e Event) {
	e.Kind = EventRecovered
	c.emit(e)
}

func (c *config) emitThrottled(e Event) {
	e.Kind = EventThrottled
	c.emit(e)
}

func (c *config) emitGaveUp(e Event) {
	e.Kind = EventGiveUp
	c.emit(e)
}
