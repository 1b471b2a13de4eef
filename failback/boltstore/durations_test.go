package boltstore_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback/boltstore"
)

// WithOpenTimeout, the package's duration option, with 0, 1 ns, a
// negative value and math.MaxInt64: 0 and negative are refused naming the
// option and the rule; 1 ns and math.MaxInt64 open a free file, and 1 ns
// gives up at once on a file another Store holds.
func TestDurationOptionsSweep(t *testing.T) {
	for _, d := range []time.Duration{0, 1, -time.Second, math.MaxInt64} {
		t.Run(d.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "q.db")
			s, err := boltstore.Open(path, boltstore.WithOpenTimeout(d), boltstore.WithNoSync())
			if d <= 0 {
				var ae *rebound.ArgumentError
				if s != nil || !errors.As(err, &ae) || ae.Func != "boltstore.WithOpenTimeout" || !strings.Contains(ae.Reason, "must") {
					t.Fatalf("WithOpenTimeout(%v): Open = %v; want an ArgumentError of boltstore.WithOpenTimeout stating the rule", d, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("WithOpenTimeout(%v): Open = %v; want it opened", d, err)
			}
			defer s.Close()
			if d == 1 {
				if s2, err := boltstore.Open(path, boltstore.WithOpenTimeout(d)); !errors.Is(err, bolterrors.ErrTimeout) {
					if s2 != nil {
						_ = s2.Close()
					}
					t.Fatalf("a second Open of a held file with a 1ns timeout = %v; want bolterrors.ErrTimeout", err)
				}
			}
		})
	}
}
