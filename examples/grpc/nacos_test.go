//go:build !race

// The Nacos run restarts the registry, which makes nacos-sdk-go v2.3.2
// clients reconnect and trips the SDK's own data race in its reconnect
// path (see subscriber/nacos/nacostest): left out of -race builds.

package main

import "testing"

func TestScenarioNacos(t *testing.T) {
	res, err := run(shortConfig("nacos"))
	if err != nil {
		t.Fatal(err)
	}
	checkRebound(t, res)
}

func TestRollingNacos(t *testing.T) { testRolling(t, "nacos") }
