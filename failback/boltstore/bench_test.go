package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
)

// down is a provider that refuses every call at once.
type down struct{}

func (down) Target() string { return "10.0.0.7:20880" }
func (down) Invoke(context.Context, *cluster.Invocation) (any, error) {
	return nil, syscall.ECONNREFUSED
}

// BenchmarkInvokeQueued measures Invoke's queued path with a bolt store:
// the first attempt fails, the call is stored (one fsync per commit, shared
// by every caller waiting: group commit) and queued; Invoke returns. The
// retries are an hour away, so none runs. callers is the number of
// goroutines calling Invoke at once; ns/op is wall time per call.
func BenchmarkInvokeQueued(b *testing.B) {
	for _, callers := range []int{1, 16, 128, 512} {
		for _, fsync := range []bool{true, false} {
			name := fmt.Sprintf("callers=%d/fsync=%v", callers, fsync)
			b.Run(name, func(b *testing.B) {
				var opts []boltstore.Option
				if !fsync {
					opts = append(opts, boltstore.WithNoSync())
				}
				st := open(b, filepath.Join(b.TempDir(), "calls.db"), opts...)
				f, err := failback.New(cluster.NewStaticDirectory(down{}), failback.WithStore(st, nil),
					failback.WithMaxTasks(1<<30), failback.WithPolicy(rebound.Policy{Initial: time.Hour}))
				if err != nil {
					b.Fatal(err)
				}
				inv := &cluster.Invocation{Method: "notify", Args: []any{"order-7", 3},
					Attachments: map[string]string{"trace": "4bf92f3577b34da6"}}
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				per := b.N / callers
				for g := range callers {
					n := per
					if g < b.N%callers {
						n++
					}
					wg.Go(func() {
						for range n {
							if _, err := f.Invoke(context.Background(), inv); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				s := st.Stats()
				b.ReportMetric(float64(s.Ops)/float64(max(s.Commits, 1)), "calls/commit")
				if q := f.Stats().Queued; q != b.N {
					b.Errorf("%d queued, want %d", q, b.N)
				}
				_ = f.Close()
				_ = st.Close()
			})
		}
	}
}

// fill stores n calls through the Store with 256 concurrent writers.
func fill(b *testing.B, st *boltstore.Store, n int) {
	now := time.Now()
	args := []byte(`["order-7",3]`)
	var wg sync.WaitGroup
	const writers = 256
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				_, err := st.Add(failback.StoredCall{Method: "notify", Args: args, Attempts: 2,
					Attachments: map[string]string{failback.IdempotencyKey: "k" + strconv.Itoa(i)},
					Due:         now.Add(time.Hour), Born: now})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkReload measures a restart with n stored calls: Load alone, and
// failback.New loading them all into its queue (decoding the arguments,
// building each task and its BackOff). 100,000 calls by default; set
// BOLTSTORE_BENCH_CALLS=1000000 for the million (about 10 s of
// set-up to write them).
func BenchmarkReload(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("BOLTSTORE_BENCH_CALLS")); err == nil && v > 0 {
		n = v
	}
	path := filepath.Join(b.TempDir(), "calls.db")
	st := open(b, path, boltstore.WithNoSync())
	fill(b, st, n)
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	info, _ := os.Stat(path)

	b.Run(fmt.Sprintf("Load/calls=%d", n), func(b *testing.B) {
		st := open(b, path)
		defer st.Close()
		b.ReportAllocs()
		for b.Loop() {
			got := 0
			if err := st.Load(func(failback.StoredCall) error { got++; return nil }); err != nil || got != n {
				b.Fatalf("loaded %d, %v", got, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9, "s/reload")
		b.ReportMetric(float64(info.Size())/float64(n), "file-bytes/call")
	})
	// Open checks the whole file before bbolt uses it (see Open): its
	// cost, against the Load that follows every Open in a restart.
	b.Run(fmt.Sprintf("Open/calls=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st, err := boltstore.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = st.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(info.Size())/1e6, "file-MB")
	})
	b.Run(fmt.Sprintf("New/calls=%d", n), func(b *testing.B) {
		st := open(b, path)
		defer st.Close()
		b.ReportAllocs()
		for b.Loop() {
			f, err := failback.New(cluster.NewStaticDirectory(down{}), failback.WithStore(st, nil), failback.WithMaxTasks(n))
			if err != nil {
				b.Fatal(err)
			}
			if q := f.Stats().Queued; q != n {
				b.Fatalf("queued %d, want %d", q, n)
			}
			b.StopTimer()
			// Close keeps the calls in the store for the next round.
			_ = f.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9, "s/reload")
	})
}
