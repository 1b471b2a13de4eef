package admit

// Observers returns the observers of s as O (rebound.Observer), in order.
func Observers[O any](s Settings) []O {
	if len(s.Observers) == 0 {
		return nil
	}
	obs := make([]O, 0, len(s.Observers))
	for _, o := range s.Observers {
		obs = append(obs, o.(O))
	}
	return obs
}

// WithoutObservers returns opts (a []rebound.Option) without their
// rebound.WithObserver options, for a layer that delivers its own events to
// those observers and keeps the rest (meters, tracers, gates) in its
// Retrier. It allocates a new slice; opts is not changed.
func WithoutObservers[O any](opts []O) []O {
	var kept []O
	for _, o := range opts {
		if len(Engine([]O{o}).Observers) == 0 {
			kept = append(kept, o)
		}
	}
	return kept
}

// Observing reports whether o (a rebound.Option) is a rebound.WithObserver
// or WithMeterProvider option, for a layer whose policy option takes no
// other.
func Observing[O any](o O) bool {
	s := Engine([]O{o})
	return len(s.Observers) > 0 || s.MeterProvider != nil
}
