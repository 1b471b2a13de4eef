package rebound

// The time seams, exported to the package's external tests only.
var (
	WithClock = withClock
	WithTimer = withTimer
)
