// Package dueheap is the due-time min-heap shared by the schedulers of
// subscriber and failback: elements ordered by due time, then by sequence
// number (FIFO among equal due times), each told its position so that it
// can be fixed or removed in place (heap.Fix, heap.Remove).
package dueheap

// An Elem is a value kept in a Heap, in practice a pointer to a struct.
type Elem interface {
	// Key returns the element's due time and sequence number.
	Key() (due int64, seq uint64)
	// SetIndex records the element's position in the heap; -1 when it
	// leaves the heap.
	SetIndex(i int32)
}

// Heap is a min-heap of elements by Key, for container/heap. The zero
// value is an empty heap. It is not safe for concurrent use: its owner
// locks.
type Heap[E Elem] []E

// Len implements heap.Interface.
func (h Heap[E]) Len() int { return len(h) }

// Less implements heap.Interface: earlier due first, then lower seq.
func (h Heap[E]) Less(i, j int) bool {
	di, si := h[i].Key()
	dj, sj := h[j].Key()
	if di != dj {
		return di < dj
	}
	return si < sj
}

// Swap implements heap.Interface.
func (h Heap[E]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].SetIndex(int32(i))
	h[j].SetIndex(int32(j))
}

// Push implements heap.Interface; use heap.Push.
func (h *Heap[E]) Push(x any) {
	e := x.(E)
	e.SetIndex(int32(len(*h)))
	*h = append(*h, e)
}

// Pop implements heap.Interface; use heap.Pop.
func (h *Heap[E]) Pop() any {
	old := *h
	n := len(old) - 1
	e := old[n]
	var zero E
	old[n] = zero
	e.SetIndex(-1)
	*h = old[:n]
	return e
}
