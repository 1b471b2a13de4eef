package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound/subscriber"
)

// watch records what one subscription's listener receives: how many lists,
// how many of them were identical to the list delivered just before to the
// same listener (duplicates), how many were empty, and the last one. Lists
// are compared in a canonical form (listKey). Safe for concurrent use.
type watch struct {
	mu           sync.Mutex
	last         string
	has          bool
	hadInstances bool // a non-empty list was delivered
	deliveries   int
	duplicates   int
	empties      int // empty lists after a non-empty one
	firstEmpties int // empty lists before any non-empty one
}

// stats is a snapshot of a watch.
type watchStats struct {
	last                                          string
	has                                           bool
	deliveries, duplicates, empties, firstEmpties int
}

func (w *watch) deliver(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deliveries++
	if w.has && key == w.last {
		w.duplicates++
	}
	switch {
	case key != "":
		w.hadInstances = true
	case w.hadInstances:
		w.empties++
	default:
		w.firstEmpties++
	}
	w.last, w.has = key, true
}

func (w *watch) stats() watchStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return watchStats{last: w.last, has: w.has, deliveries: w.deliveries, duplicates: w.duplicates, empties: w.empties, firstEmpties: w.firstEmpties}
}

// sdkCallback is the listener in the form nacos-sdk-go calls it
// (vo.SubscribeParam.SubscribeCallback). v2.3.2 never passes an error.
func (w *watch) sdkCallback(hosts []model.Instance, err error) {
	if err != nil {
		return
	}
	w.deliver(sdkKey(hosts))
}

// listener is the listener in the form a subscriber.Manager calls it.
func (w *watch) listener(list []subscriber.Instance) {
	keys := make([]string, len(list))
	for i, in := range list {
		keys[i] = instanceKey(in.IP, in.Port, in.Weight, in.Healthy, in.Enabled)
	}
	w.deliver(listKey(keys))
}

// sdkKey is the canonical form of an SDK instance list.
func sdkKey(hosts []model.Instance) string {
	keys := make([]string, len(hosts))
	for i, h := range hosts {
		keys[i] = instanceKey(h.Ip, h.Port, h.Weight, h.Healthy, h.Enable)
	}
	return listKey(keys)
}

// instanceKey is what identifies an instance in a delivered list: its
// address and the flags a load balancer uses.
func instanceKey(ip string, port uint64, weight float64, healthy, enabled bool) string {
	return fmt.Sprintf("%s:%d w=%g h=%t e=%t", ip, port, weight, healthy, enabled)
}

// listKey joins sorted instance keys; the empty list is "".
func listKey(keys []string) string {
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(a, b) })
	return strings.Join(keys, ",")
}
