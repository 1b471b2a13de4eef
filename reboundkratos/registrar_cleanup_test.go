package reboundkratos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2/registry"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A Register whose http part keeps failing until kratos' ctx ends
// deregisters the grpc part it had registered, against a real Nacos
// client and server: the cleanup has a context of its own. It ran with the
// ctx that had just been cancelled, so nothing was deregistered and the
// grpc instance stayed in Nacos as a ghost.
func TestRegisterFailureCleanupOutlivesCtx(t *testing.T) {
	e := newNacosEnv(t)
	client := e.client(t)
	errDown := errors.New("http part: registry unreachable")
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos,
		func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
			if key.Service == "helloworld.http" {
				return nil, errDown
			}
			return nacos.Register(ctx, client, key, inst, nacos.WithPolicy(fastPolicy))
		}, reboundkratos.WithDrainDelay(0), reboundkratos.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	si := &registry.ServiceInstance{ID: "p1", Name: "helloworld", Version: "v1",
		Endpoints: []string{"grpc://127.0.0.1:9000", "http://127.0.0.1:8000"}}
	// kratos' ctx is cancelled (App.Stop), not timed out: the engine
	// stops early at a deadline it cannot reach, not at a cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(time.Second, cancel)
	if err := r.Register(ctx, si); !errors.Is(err, errDown) {
		t.Fatalf("Register = %v, want the http part's error", err)
	}
	grpcPart := func() int { return len(e.srv.Instances("", "", "helloworld.grpc")) }
	subscribertest.Eventually(t, 15*time.Second, "the grpc part deregistered after the failed Register", func() bool {
		return grpcPart() == 0
	})
}
