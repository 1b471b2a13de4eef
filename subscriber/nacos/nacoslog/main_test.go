package nacoslog_test

import (
	"testing"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

func TestMain(m *testing.M) { nacostest.VerifyTestMain(m) }
