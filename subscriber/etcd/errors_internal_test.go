package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		closed    bool
		permanent bool
		regClosed bool
	}{
		{"no leader", rpctypes.ErrNoLeader, false, false, false},
		{"leader changed", rpctypes.ErrLeaderChanged, false, false, false},
		{"timeout", rpctypes.ErrTimeout, false, false, false},
		{"timeout leader fail", rpctypes.ErrTimeoutDueToLeaderFail, false, false, false},
		{"stopped", rpctypes.ErrStopped, false, false, false},
		{"unhealthy", rpctypes.ErrUnhealthy, false, false, false},
		{"compacted", rpctypes.ErrCompacted, false, false, false},
		{"too many requests", rpctypes.ErrTooManyRequests, false, false, false},
		{"grpc unavailable", status.Error(codes.Unavailable, "connection refused"), false, false, false},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "deadline"), false, false, false},
		{"attempt deadline", context.DeadlineExceeded, false, false, false},
		{"cancelled", context.Canceled, false, false, false},
		{"not connected", errNotConnected, false, false, false},
		{"unknown", errors.New("something odd"), false, false, false},
		{"auth old revision", rpctypes.ErrAuthOldRevision, false, false, false},
		{"permission denied", rpctypes.ErrPermissionDenied, false, true, false},
		{"auth failed", rpctypes.ErrAuthFailed, false, true, false},
		{"wrapped permission denied", fmt.Errorf("x: %w", rpctypes.ErrPermissionDenied), false, true, false},
		{"grpc permission denied", status.Error(codes.PermissionDenied, "no"), false, true, false},
		{"closed client", status.Error(codes.Canceled, "grpc: the client connection is closing"), true, false, true},
		{"closed, any error", rpctypes.ErrNoLeader, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify("get", "/p/", tc.err, tc.closed)
			if !strings.HasPrefix(got.Error(), "etcd: get /p/: ") {
				t.Fatalf("classify = %v, want the error of get /p/", got)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("classify = %v does not wrap %v", got, tc.err)
			}
			if p := rebound.IsPermanent(got); p != tc.permanent {
				t.Errorf("permanent = %v, want %v (%v)", p, tc.permanent, got)
			}
			if c := errors.Is(got, rebound.ErrClosed); c != tc.regClosed {
				t.Errorf("registry closed = %v, want %v (%v)", c, tc.regClosed, got)
			}
		})
	}
	if classify("get", "/p/", nil, true) != nil {
		t.Error("classify(nil) != nil")
	}
}

// TestVocabulary: the adapter's errors match the shared families the
// same way the Nacos adapter's do (issue 10).
func TestVocabulary(t *testing.T) {
	if err := classify("get", "/p/", errNotConnected, false); rebound.IsPermanent(err) || errors.Is(err, rebound.ErrClosed) {
		t.Errorf("not connected: %v, want a transient error (neither permanent nor closed)", err)
	}
	closed := classify("get", "/p/", errors.New("x"), true)
	if !errors.Is(closed, rebound.ErrClosed) {
		t.Errorf("closed error %v does not match rebound.ErrClosed", closed)
	}
	if err := classify("watch", "/p/", errNotConnected, false); !strings.HasPrefix(err.Error(), "etcd: watch ") || !errors.Is(err, errNotConnected) {
		t.Errorf("classify = %v, want the error of etcd's watch", err)
	}
	var ae *rebound.ArgumentError
	if _, err := New(nil); !errors.As(err, &ae) || ae.Func != "etcd.New" || ae.Arg != "client" {
		t.Errorf("New(nil) = %v, want a rebound.ArgumentError of etcd.New naming client", err)
	}
	_, err := newRegisterOptions([]Option{nil, WithTTL(0)})
	if !errors.As(err, &ae) || ae.Func != "etcd.WithTTL" {
		t.Errorf("WithTTL(0) = %v, want a rebound.ArgumentError of etcd.WithTTL", err)
	}
	// The options of Register only are refused by New, naming the option.
	for _, o := range []Option{WithTTL(time.Minute), WithPolicy(rebound.Policy{}), WithPolicy(rebound.Policy{}, rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {})))} {
		_, err := newRegistryOptions([]Option{WithPrefix("/p"), o})
		if !errors.As(err, &ae) || ae.Func != "etcd.New" || ae.Arg != "opts" || !strings.Contains(err.Error(), "etcd.With") {
			t.Errorf("New with a Register option = %v, want a rebound.ArgumentError of etcd.New naming it", err)
		}
	}
}

// WithPolicy's options are the registration's observers and meter; a gate
// or a limit is an ArgumentError naming the rule.
func TestWithPolicyObservers(t *testing.T) {
	obs := rebound.ObserverFunc(func(rebound.Event) {})
	mp := noop.NewMeterProvider()
	o, err := newRegisterOptions([]Option{WithPolicy(rebound.Policy{}, rebound.WithObserver(obs), nil), WithPolicy(rebound.Policy{Initial: time.Second},
		rebound.WithObserver(obs), rebound.WithMeterProvider(mp))})
	if err != nil || len(o.obs) != 2 || o.meter != mp || o.policy.Initial != time.Second {
		t.Fatalf("WithPolicy twice: %d observers, meter %v, policy %+v, err %v; want 2, mp, the second policy, nil", len(o.obs), o.meter, o.policy, err)
	}
	for _, bad := range []rebound.Option{rebound.WithMaxAttempts(3), rebound.WithMaxElapsed(time.Minute)} {
		_, err := newRegisterOptions([]Option{WithPolicy(rebound.Policy{}, bad)})
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Func != "etcd.WithPolicy" || !strings.Contains(ae.Reason, "only rebound.WithObserver") {
			t.Errorf("WithPolicy with %T = %v, want an ArgumentError of etcd.WithPolicy stating the rule", bad, err)
		}
	}
}
