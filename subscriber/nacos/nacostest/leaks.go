package nacostest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound/subscriber/subscribertest"
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
		// rpc.(*RpcClient).notifyConnectionChange (rpc_client.go) sends a
		// connection event on a channel of capacity 1 whose only reader
		// ends when CloseClient cancels the client's context: a client
		// closed while it reconnects (or right after) leaves the sender
		// blocked for good. IgnoreAnyFunction: its top frame is the
		// runtime's channel send.
		goleak.IgnoreAnyFunction("github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc.(*RpcClient).notifyConnectionChange"),
	}
}

var logDir struct {
	once sync.Once
	path string
}

var cacheDir struct {
	once sync.Once
	root string
	n    atomic.Int64
}

// CacheDir returns a new, empty directory for a client's cache
// (ClientConfig.CacheDir), for the test t. Use it instead of t.TempDir():
// nacos-sdk-go writes its cache from its own goroutines (a push, its redo)
// and may still do so after CloseClient returns, so t.TempDir's cleanup can
// fail with "directory not empty". The directories live under one root per
// test binary, which VerifyTestMain removes at the end. It panics if the
// directory cannot be created.
func CacheDir(t testing.TB) string {
	cacheDir.once.Do(func() {
		dir, err := os.MkdirTemp("", "nacostest-cache-")
		if err != nil {
			panic(fmt.Sprintf("nacostest: creating the SDK cache directory: %v", err))
		}
		cacheDir.root = dir
	})
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r == ' ' || r < 32 {
			return '_'
		}
		return r
	}, t.Name())
	if len(name) > 64 {
		name = name[:64]
	}
	dir := filepath.Join(cacheDir.root, fmt.Sprintf("%s-%d", name, cacheDir.n.Add(1)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(fmt.Sprintf("nacostest: creating the SDK cache directory: %v", err))
	}
	return dir
}

// RemoveDir removes dir, a directory nacos-sdk-go clients wrote their cache
// or logs to, like os.RemoveAll, but tolerates the SDK writing to it while
// it is being removed (it may, after CloseClient: see CacheDir): it tries
// again for up to a second, then returns the last error. For programs that
// keep the SDK's files in a temporary directory and remove it on exit.
func RemoveDir(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for range 20 {
		t.Reset(50 * time.Millisecond)
		<-t.C
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
	}
	return err
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

// VerifyNone fails t if goroutines other than the SDK's own (SDKLeaks) and
// those opts ignore are still running after up to 10 s. It waits longer
// than goleak.VerifyNone (about half a second): after CloseClient and
// Server.Close, the SDK's connection goroutines (its gRPC stream, its HTTP
// agent's keep-alive connections) end only once they have seen their
// connection closed, which takes seconds on a loaded machine.
func VerifyNone(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := subscribertest.FindLeaks(10*time.Second, append(SDKLeaks(), opts...)...); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain runs the tests of a package that uses the real
// nacos-sdk-go client, then fails the run if any goroutine other than the
// SDK's own (SDKLeaks) is left after up to 10 s (see VerifyNone), removes
// LogDir and the CacheDir directories, and exits. Use it as the package's
// TestMain:
//
//	func TestMain(m *testing.M) { nacostest.VerifyTestMain(m) }
//
// opts are further goleak options.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := subscribertest.FindLeaks(10*time.Second, append(SDKLeaks(), opts...)...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	if logDir.path != "" {
		_ = RemoveDir(logDir.path)
	}
	if cacheDir.root != "" {
		_ = RemoveDir(cacheDir.root)
	}
	os.Exit(code)
}
