package etcd_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// A Register whose put fails because its ctx ended (the cluster stopped
// answering between the grant and the put) returns when ctx is done: the
// revocation of the lease it granted is bounded by ctx as well, not by
// the attempt timeout alone (here an hour).
func TestRegisterCancelledDuringPutReturnsWithCtx(t *testing.T) {
	c := newCluster(t, 1)
	var (
		mu      sync.Mutex
		block   = true
		entered = make(chan struct{}, 1)
		release = make(chan struct{})
	)
	// Txn (the put) and LeaseRevoke wait as on an unreachable cluster: until their
	// ctx ends (or the test ends).
	stall := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		b := block
		mu.Unlock()
		if b && (strings.HasSuffix(method, "/Txn") || strings.HasSuffix(method, "/LeaseRevoke")) {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-release:
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cfg := etcdreg.ClientConfig(nil, c.Endpoints()...)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(stall))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.1", 80), etcdreg.WithAttemptTimeout(time.Hour))
		res <- err
	}()
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("Register sent no put")
	}
	cancel()
	select {
	case err := <-res:
		if err == nil {
			t.Errorf("Register with its ctx cancelled during the put returned nil")
		}
	case <-time.After(waitTimeout):
		t.Errorf("Register did not return within %v of its ctx's end (the lease's revocation waits for the attempt timeout)", waitTimeout)
		close(release)
		<-res
	}
	mu.Lock()
	block = false
	mu.Unlock()
}
