package nacostest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// SDKLeaks returns goleak options that ignore the goroutines nacos-sdk-go
// v2.3.2 itself leaves behind after CloseClient, so that a test can check
// that its own code leaks nothing. VerifyTestMain uses them.
//
// None of them belongs to nacostest or to the rest of rebound.
func SDKLeaks() []goleak.Option {
	return []goleak.Option{
		// naming_http.PushReceiver.startServer (push_receiver.go) runs a
		// UDP read loop that checks its context only between reads, so
		// CloseClient never ends it. Its top frame is in the runtime's
		// network poller, hence IgnoreAnyFunction.
		goleak.IgnoreAnyFunction("github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_http.(*PushReceiver).startServer.func1"),
		// The SDK's global file logger (lumberjack) is never closed; its
		// first write starts this cleanup goroutine, which only ends on
		// Close.
		goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"),
	}
}

var logDir struct {
	once sync.Once
	path string
}

// LogDir returns a directory for the SDK's log file (ClientConfig.LogDir),
// one per process, created on first use. The SDK's logger is global: every
// NewNamingClient re-points it at its own LogDir, where it keeps writing
// after the test that made the client has ended, so a per-test
// t.TempDir() could be removed under its feet. VerifyTestMain removes the
// directory at the end of the test binary. It panics if the directory
// cannot be created.
func LogDir() string {
	logDir.once.Do(func() {
		dir, err := os.MkdirTemp("", "nacostest-log-")
		if err != nil {
			panic(fmt.Sprintf("nacostest: creating the SDK log directory: %v", err))
		}
		logDir.path = dir
	})
	return logDir.path
}

// VerifyTestMain runs the tests of a package that uses the real
// nacos-sdk-go client, then fails the run if any goroutine other than the
// SDK's own (SDKLeaks) is left, removes LogDir and exits. Use it as the
// package's TestMain:
//
//	func TestMain(m *testing.M) { nacostest.VerifyTestMain(m) }
//
// opts are further goleak options.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	opts = append(append(SDKLeaks(), opts...), goleak.Cleanup(func(code int) {
		if logDir.path != "" {
			_ = os.RemoveAll(logDir.path)
		}
		os.Exit(code)
	}))
	goleak.VerifyTestMain(m, opts...)
}
