// The Nacos clients reconnect in this file's tests: nacos-sdk-go v2.3.2
// races on its own state when it reconnects, so these tests do not run
// under the race detector.

//go:build !race

package reboundkratos_test

import (
	"testing"
	"time"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestKratosNacosDownAtStartAndRestart: the kratos client starts while
// Nacos is down: the dial does not fail (the contrib registry's Watch
// fails it), RPCs reach the providers once Nacos is back; then a Nacos
// restart with fresh state, with the first subscribe and the first
// register of every new connection rejected by TPS control (the SDK's
// redo counts a rejected one as done), under load: no RPC fails, every
// provider is registered again and reached, and a provider started after
// it is reached.
func TestKratosNacosDownAtStartAndRestart(t *testing.T) {
	env := newNacosEnv(t)
	p1 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	p2 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})

	env.srv.SetRefuseConnections(true)
	env.srv.DropStreams()
	d := env.discovery(t)
	cc := dialKratos(t, d, "helloworld.grpc") // fails the test on a dial failure
	time.Sleep(time.Second)
	env.srv.SetRefuseConnections(false)
	waitProviders(t, cc, p1, p2)

	load := startLoad(t, cc)
	for _, rt := range []string{nacostest.RequestSubscribeService, nacostest.RequestInstance} {
		if err := env.srv.SetRejection(rt, nacostest.Rejection{FirstPerConnection: 1}); err != nil {
			t.Fatal(err)
		}
	}
	env.srv.Stop()
	time.Sleep(2 * time.Second)
	if err := env.srv.Start(); err != nil {
		t.Fatal(err)
	}
	// p1 and p2 were not restarted: the registry lists them again only
	// because their Registrations re-registered the rejected redo.
	subscribertest.Eventually(t, testTimeout, "p1 and p2 registered again", func() bool {
		return len(env.srv.Instances("", "", "helloworld.grpc")) == 2
	})
	p3 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	waitProviders(t, cc, p1, p2, p3)
	load.stop()
	t.Logf("Nacos restart: %d RPCs ok, %d failed; discovery %+v; server %+v", load.ok.Load(), load.failed.Load(), reboundkratos.ViewStats(d), env.srv.Stats())
	if n := load.failed.Load(); n > 0 {
		t.Fatalf("%d RPCs failed through the Nacos restart (first: %v)", n, load.firstErr.Load())
	}
}
