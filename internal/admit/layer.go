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

// Observing reports whether o (a rebound.Option) is a rebound.WithObserver
// or WithMeterProvider option, for a layer whose policy option takes no
// other.
func Observing[O any](o O) bool {
	s := Engine([]O{o})
	return len(s.Observers) > 0 || s.MeterProvider != nil
}
