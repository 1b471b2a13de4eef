//go:build !unix

package main

import "time"

// cpuTime is not available without getrusage: the table shows "n/a".
func cpuTime() (time.Duration, bool) { return 0, false }
