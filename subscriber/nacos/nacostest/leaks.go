package nacostest

import "go.uber.org/goleak"

// SDKLeaks returns goleak options that ignore the goroutines nacos-sdk-go
// v2.3.2 itself leaves behind after CloseClient, so that a test can check
// that its own code leaks nothing:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, nacostest.SDKLeaks()...)
//	}
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
