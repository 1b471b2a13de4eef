package reboundpg_test

import (
	"fmt"
	"syscall"
)

var errUnavailable = fmt.Errorf("provider: %w", syscall.ECONNREFUSED)
