package dueheap_test

import (
	"container/heap"
	"testing"

	"github.com/rebound-go/rebound/internal/dueheap"
)

type item struct {
	due   int64
	seq   uint64
	index int32
}

func (it *item) Key() (int64, uint64) { return it.due, it.seq }
func (it *item) SetIndex(i int32)     { it.index = i }

func TestOrderAndIndex(t *testing.T) {
	var h dueheap.Heap[*item]
	items := []*item{{due: 5, seq: 1}, {due: 1, seq: 3}, {due: 5, seq: 0}, {due: 1, seq: 2}, {due: 3, seq: 4}}
	for _, it := range items {
		heap.Push(&h, it)
	}
	check := func() {
		t.Helper()
		for i, it := range h {
			if it.index != int32(i) {
				t.Fatalf("index %d at position %d", it.index, i)
			}
		}
	}
	check()
	items[4].due = 0 // (3,4) -> (0,4): first
	heap.Fix(&h, int(items[4].index))
	check()
	removed := items[0] // (5,1)
	heap.Remove(&h, int(removed.index))
	check()
	if removed.index != -1 {
		t.Errorf("removed index %d, want -1", removed.index)
	}
	var got [][2]int64
	for h.Len() > 0 {
		it := heap.Pop(&h).(*item)
		if it.index != -1 {
			t.Errorf("popped index %d, want -1", it.index)
		}
		got = append(got, [2]int64{it.due, int64(it.seq)})
		check()
	}
	want := [][2]int64{{0, 4}, {1, 2}, {1, 3}, {5, 0}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
