package reboundkratos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2/registry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd"
)

// TestRegistrarLogsScrubEndpointCredentials: endpoints carrying a user and
// password (grpc://user:pw@host:port) are logged without the password, by
// a Registrar over a real etcd.
func TestRegistrarLogsScrubEndpointCredentials(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	env := newEtcdEnv(t)
	client := env.client(t)
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd,
		func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
			return etcd.Register(ctx, client, key, inst, etcd.WithLayout(reboundkratos.EtcdLayout("")), etcd.WithTTL(5*time.Second))
		}, reboundkratos.WithDrainDelay(0), reboundkratos.WithPolicy(fastPolicy), reboundkratos.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	si := &registry.ServiceInstance{ID: "p1", Name: "creds", Version: "v1",
		Endpoints: []string{"grpc://svc:s3cret@127.0.0.1:9000?isSecure=false", "http://u:p4ss@127.0.0.1:8000"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Register(ctx, si); err != nil {
		t.Fatal(err)
	}
	if err := r.Deregister(ctx, si); err != nil {
		t.Fatal(err)
	}
	registered := false
	for _, e := range logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, "s3cret") || strings.Contains(line, "p4ss") {
			t.Errorf("a log line carries a password: %s", line)
		}
		registered = registered || (e.Message == "registered" && strings.Contains(line, "svc:") && strings.Contains(line, "127.0.0.1:9000"))
	}
	if !registered {
		t.Fatalf("no \"registered\" line naming the endpoints; lines: %v", logs.All())
	}
}
