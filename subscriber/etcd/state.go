package etcd

import (
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound/subscriber"
)

// state is the instance list of one subscription as of revision rev. It
// is owned by one goroutine at a time (Subscribe, then the watch
// goroutine).
type state struct {
	prefix   string
	layout   Layout
	clusters map[string]struct{} // nil: every cluster
	log      *zap.Logger
	rev      int64                          // last revision applied
	byID     map[string]subscriber.Instance // every decodable instance
}

func newState(layout Layout, prefix string, clusters []string, log *zap.Logger) *state {
	st := &state{prefix: prefix, layout: layout, log: log, byID: make(map[string]subscriber.Instance)}
	if len(clusters) > 0 {
		st.clusters = make(map[string]struct{}, len(clusters))
		for _, c := range clusters {
			st.clusters[c] = struct{}{}
		}
	}
	return st
}

// load replaces the state with a Get's result.
func (st *state) load(resp *clientv3.GetResponse) {
	clear(st.byID)
	st.rev = resp.Header.Revision
	for _, kv := range resp.Kvs {
		st.put(kv)
	}
}

// apply applies the events of one watch response and reports whether the
// filtered list changed. Events at or below the revision already applied
// are skipped, so a change is never applied twice. Events of one
// revision (one transaction) always come in the same response.
func (st *state) apply(events []*clientv3.Event) bool {
	base := st.rev
	changed := false
	for _, ev := range events {
		kv := ev.Kv
		if kv == nil || kv.ModRevision <= base {
			continue
		}
		st.rev = max(st.rev, kv.ModRevision)
		id, ok := st.id(kv.Key)
		if !ok {
			continue
		}
		old, had := st.byID[id]
		switch ev.Type {
		case mvccpb.PUT:
			st.put(kv)
		case mvccpb.DELETE:
			delete(st.byID, id)
		}
		now, has := st.byID[id]
		if (had && st.match(old)) || (has && st.match(now)) {
			changed = true
		}
	}
	return changed
}

// id returns the part of key after the prefix; false for the prefix
// itself (the layout decides which keys below it are instances).
func (st *state) id(key []byte) (string, bool) {
	id, ok := strings.CutPrefix(string(key), st.prefix)
	if !ok || id == "" {
		return "", false
	}
	return id, true
}

func (st *state) put(kv *mvccpb.KeyValue) {
	id, ok := st.id(kv.Key)
	if !ok {
		return
	}
	inst, err := st.layout.Decode(id, kv.Value)
	if err != nil {
		// Not ours, or written by a broken provider: skip it (and forget
		// a previous value: the instance is no longer valid).
		delete(st.byID, id)
		if errors.Is(err, ErrNotInstance) {
			return
		}
		st.log.Warn("skipping undecodable instance", zap.String("key", string(kv.Key)), zap.Error(err))
		return
	}
	st.byID[id] = inst
}

func (st *state) match(inst subscriber.Instance) bool {
	if st.clusters == nil {
		return true
	}
	_, ok := st.clusters[inst.Cluster]
	return ok
}

// list returns a new slice with the instances that pass the cluster
// filter, in no particular order (the Manager sorts). The Metadata maps
// are shared with the state, which never modifies them.
func (st *state) list() []subscriber.Instance {
	out := make([]subscriber.Instance, 0, len(st.byID))
	for _, inst := range st.byID {
		if st.match(inst) {
			out = append(out, inst)
		}
	}
	return out
}
