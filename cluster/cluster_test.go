package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeInvoker is an Invoker with a fixed target.
type fakeInvoker struct{ target string }

func (f *fakeInvoker) Target() string { return f.target }
func (f *fakeInvoker) Invoke(context.Context, *Invocation) (any, error) {
	return f.target, nil
}

func invokers(targets ...string) []Invoker {
	out := make([]Invoker, len(targets))
	for i, t := range targets {
		out[i] = &fakeInvoker{target: t}
	}
	return out
}

func targets(ivs []Invoker) []string {
	out := make([]string, len(ivs))
	for i, iv := range ivs {
		out[i] = iv.Target()
	}
	return out
}

func TestStaticDirectory(t *testing.T) {
	ivs := invokers("a:1", "b:2")
	d := NewStaticDirectory(ivs[0], nil, ivs[1])
	got, err := d.List(context.Background(), &Invocation{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if fmt.Sprint(targets(got)) != "[a:1 b:2]" {
		t.Fatalf("List = %v, want [a:1 b:2] (nil left out, order kept)", targets(got))
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = d.List(context.Background(), nil) }); allocs != 0 {
		t.Errorf("List allocates %v times, want 0", allocs)
	}

	// The arguments are copied: changing the caller's slice changes nothing.
	args := invokers("c:3")
	d2 := NewStaticDirectory(args...)
	args[0] = &fakeInvoker{target: "changed"}
	got, _ = d2.List(context.Background(), nil)
	if got[0].Target() != "c:3" {
		t.Errorf("directory follows the caller's slice: %v", targets(got))
	}

	for _, empty := range []Directory{NewStaticDirectory(), NewStaticDirectory(nil, nil)} {
		got, err := empty.List(context.Background(), nil)
		if !errors.Is(err, ErrNoInvokers) || got != nil {
			t.Errorf("empty List = %v, %v; want nil, ErrNoInvokers", got, err)
		}
	}
}

func TestLoadBalanceEmpty(t *testing.T) {
	for name, lb := range map[string]LoadBalance{"random": Random(), "roundrobin": RoundRobin()} {
		for _, list := range [][]Invoker{nil, {}, {nil, nil}} {
			iv, err := lb.Select(list, nil, invokers("a:1"))
			if !errors.Is(err, ErrNoInvokers) || iv != nil {
				t.Errorf("%s.Select(%v) = %v, %v; want nil, ErrNoInvokers", name, list, iv, err)
			}
		}
	}
}

func TestLoadBalanceExclude(t *testing.T) {
	all := invokers("a:1", "b:2", "c:3")
	for name, lb := range map[string]LoadBalance{"random": Random(), "roundrobin": RoundRobin()} {
		t.Run(name, func(t *testing.T) {
			// Exclusion compares Targets, not identities.
			exclude := invokers("a:1", "c:3")
			for range 200 {
				iv, err := lb.Select(all, nil, exclude)
				if err != nil || iv.Target() != "b:2" {
					t.Fatalf("Select excluding a, c = %v, %v; want b:2", iv, err)
				}
			}
			// Everything excluded: pick among all rather than fail.
			seen := map[string]int{}
			for range 300 {
				iv, err := lb.Select(all, nil, all)
				if err != nil {
					t.Fatalf("Select with all excluded: %v", err)
				}
				seen[iv.Target()]++
			}
			if len(seen) != 3 {
				t.Errorf("with all excluded, picked only %v; want all three", seen)
			}
			// nil entries are never picked.
			withNil := []Invoker{nil, all[0], nil, all[1]}
			for range 100 {
				iv, err := lb.Select(withNil, nil, nil)
				if err != nil || iv == nil {
					t.Fatalf("Select over list with nils = %v, %v", iv, err)
				}
				iv, err = lb.Select(withNil, nil, all[:1])
				if err != nil || iv.Target() != "b:2" {
					t.Fatalf("Select over list with nils excluding a = %v, %v", iv, err)
				}
			}
		})
	}
}

func TestRoundRobinRotates(t *testing.T) {
	all := invokers("a:1", "b:2", "c:3")
	rr := RoundRobin()
	var got []string
	for range 6 {
		iv, _ := rr.Select(all, nil, nil)
		got = append(got, iv.Target())
	}
	if fmt.Sprint(got) != "[a:1 b:2 c:3 a:1 b:2 c:3]" {
		t.Errorf("round robin order = %v", got)
	}
}

func TestRandomSpreads(t *testing.T) {
	all := invokers("a:1", "b:2", "c:3", "d:4")
	r := Random()
	seen := map[string]int{}
	for range 4000 {
		iv, _ := r.Select(all, nil, nil)
		seen[iv.Target()]++
	}
	for _, iv := range all {
		// Expect 1000 each; 700 is more than 10 standard deviations away.
		if n := seen[iv.Target()]; n < 700 {
			t.Errorf("random picked %s %d times of 4000, want about 1000 (%v)", iv.Target(), n, seen)
		}
	}
}

func TestLoadBalanceConcurrentNoAlloc(t *testing.T) {
	all := invokers("a:1", "b:2", "c:3")
	exclude := all[:1]
	for name, lb := range map[string]LoadBalance{"random": Random(), "roundrobin": RoundRobin()} {
		if a := testing.AllocsPerRun(100, func() { _, _ = lb.Select(all, nil, nil) }); a != 0 {
			t.Errorf("%s: Select allocates %v times", name, a)
		}
		if a := testing.AllocsPerRun(100, func() { _, _ = lb.Select(all, nil, exclude) }); a != 0 {
			t.Errorf("%s: Select with exclude allocates %v times", name, a)
		}
		var wg sync.WaitGroup
		counts := make([]map[string]int, 4)
		for g := range counts {
			counts[g] = map[string]int{}
			wg.Go(func() {
				for range 1000 {
					iv, err := lb.Select(all, nil, exclude)
					if err != nil {
						t.Errorf("%s: Select: %v", name, err)
						return
					}
					counts[g][iv.Target()]++
				}
			})
		}
		wg.Wait()
		for g, c := range counts {
			if c["a:1"] != 0 || c["b:2"]+c["c:3"] != 1000 {
				t.Errorf("%s: goroutine %d picked %v", name, g, c)
			}
		}
	}
}

func BenchmarkSelect(b *testing.B) {
	all := invokers("a:1", "b:2", "c:3", "d:4")
	for name, lb := range map[string]LoadBalance{"random": Random(), "roundrobin": RoundRobin()} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = lb.Select(all, nil, nil)
			}
		})
		b.Run(name+"/exclude1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = lb.Select(all, nil, all[1:2])
			}
		})
	}
}

// BenchmarkSelectParallel is Select from every P at once (issue 14 item
// 12): RoundRobin's one shared counter is a contended cache line, Random
// draws from math/rand/v2's per-thread source. Run with -cpu 1,2,... to see
// how each scales.
func BenchmarkSelectParallel(b *testing.B) {
	all := invokers("a:1", "b:2", "c:3", "d:4")
	for _, name := range []string{"random", "roundrobin"} {
		lb := map[string]LoadBalance{"random": Random(), "roundrobin": RoundRobin()}[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = lb.Select(all, nil, nil)
				}
			})
		})
	}
}
