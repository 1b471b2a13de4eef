package nacos_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// logDir receives the SDK's log file. The SDK's logger is global and every
// NewNamingClient re-points it at its own LogDir, where it keeps writing
// after the test that made it has ended: one directory per test binary.
var logDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rebound-nacos-log-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logDir = dir
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(nacostest.SDKLeaks()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
