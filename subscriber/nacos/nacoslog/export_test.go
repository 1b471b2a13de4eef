package nacoslog

// Unexported names the external tests use: the bridge itself, and the
// throttle interval (a minute in every use).
var (
	New          = newBridge
	WithInterval = withInterval
	WithLevel    = withLevel
)

// Option is a bridge option.
type Option = option
