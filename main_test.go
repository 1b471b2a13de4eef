package rebound_test

import (
	"testing"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// The end-to-end tests (subscriber_test.go, subscriber_reconnect_test.go)
// run the real nacos-sdk-go client, which leaves two goroutines of its own
// behind (see nacostest.SDKLeaks); every other test in this package is
// checked for leaks by the same TestMain.
func TestMain(m *testing.M) { nacostest.VerifyTestMain(m) }
