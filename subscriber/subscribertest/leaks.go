package subscribertest

import (
	"time"

	"go.uber.org/goleak"
)

// FindLeaks calls goleak.Find(opts...) until it finds no unexpected
// goroutine or d has passed, and returns its last error (nil: none left).
//
// Why not goleak.Find alone: it gives goroutines about half a second to
// end. A connection closed on both sides of a loopback socket (a gRPC
// stream, an HTTP keep-alive connection, etcd's peer transport) ends its
// goroutines only when each side has seen the close, which on a loaded
// machine can take seconds.
func FindLeaks(d time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(d)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
