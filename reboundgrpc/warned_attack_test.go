package reboundgrpc

import (
	"fmt"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

type nopCC struct{}

func (nopCC) UpdateState(resolver.State) error                     { return nil }
func (nopCC) ReportError(error)                                    {}
func (nopCC) NewAddress([]resolver.Address)                        {}
func (nopCC) ParseServiceConfig(string) *serviceconfig.ParseResult { return nil }

// TestWarnedKeepsReleasedKeys: the Builder remembers, per key, which list
// it logged "every instance is filtered out" for, so that the ClientConns
// of one key log it once. It forgets the key with the key's last
// resolver and remembers a version, not the list. Before, a key whose
// ClientConns all closed while its list was all filtered out was never
// forgotten: with targets that come and go (one ClientConn per tenant,
// per short-lived job) the map grew by one entry per key, each keeping
// the key's whole last list reachable after its subscription was gone.
func TestWarnedKeepsReleasedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		b, err := NewBuilder(m)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		const n = 200
		for i := range n {
			name := fmt.Sprintf("job-%d", i)
			// every instance unhealthy: filtered out, logged once
			list := make([]subscriber.Instance, 100)
			for j := range list {
				list[j] = subscriber.Instance{ID: fmt.Sprint(j), IP: "10.0.0.1", Port: uint64(1000 + j), Weight: 1, Enabled: true}
			}
			reg.Set(subscriber.Key{Service: name}, list...)
			u, _ := url.Parse("rebound:///" + name)
			r, err := b.Build(resolver.Target{URL: *u}, nopCC{}, resolver.BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			r.Close()
		}
		time.Sleep(time.Hour) // well past the linger: every key released
		synctest.Wait()
		st := b.Stats()
		b.mu.Lock()
		warned := len(b.keys)
		b.mu.Unlock()
		if warned > 0 {
			t.Errorf("%d keys built and released (stats: %d subscriptions, %d resolvers); the Builder still holds "+
				"%d keys' entries (what filteredOut logged)", n, st.Subscriptions, st.Resolvers, warned)
		}
	})
}
