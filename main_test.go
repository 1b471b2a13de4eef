package rebound_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The end-to-end tests (subscriber_test.go, subscriber_reconnect_test.go)
// run the real nacos-sdk-go client, which leaves two goroutines of its own
// behind (see sdkLeaks); every other test in this package is checked for
// leaks by the same TestMain.

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
		if err := goleak.Find(sdkLeaks()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// sdkLeaks lists the goroutines nacos-sdk-go v2.3.2 itself leaves behind;
// none of them is ours.
func sdkLeaks() []goleak.Option {
	return []goleak.Option{
		// naming_http.PushReceiver.startServer (push_receiver.go) runs a UDP
		// read loop that checks its context only between reads:
		// CloseClient never ends it. Its top frame is in the network poller.
		goleak.IgnoreAnyFunction("github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_http.(*PushReceiver).startServer.func1"),
		// The SDK's global file logger (lumberjack) is never closed; its
		// first write starts this cleanup goroutine.
		goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"),
	}
}
