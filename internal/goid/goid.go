// Package goid reads the id of the calling goroutine. rebound uses it only
// to detect a Close or Shutdown called from inside one of its own
// callbacks (a subscriber listener or hook, a failback hook), which would
// otherwise wait for itself. Go offers no goroutine identity on purpose;
// the first line of a stack trace ("goroutine 123 [running]:") is the one
// stable place the runtime prints it.
package goid

import (
	"bytes"
	"runtime"
)

// ID returns the id of the calling goroutine.
func ID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, _ = bytes.CutPrefix(b, []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
