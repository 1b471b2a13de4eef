//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) the process has used so far,
// from getrusage(RUSAGE_SELF), and whether it is available.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
