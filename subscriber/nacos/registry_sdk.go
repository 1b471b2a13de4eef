package nacos

import (
	"maps"
	"strings"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound/subscriber"
)

// callback is the SDK callback of one subscription (one func value per
// subscription, at one stable address). The SDK runs it after it stored a
// new list for the key.
func (s *sub) callback(hosts []model.Instance, err error) {
	if err != nil || !s.active.Load() {
		return
	}
	// The cache holds this list or one stored after it: the SDK stores
	// without a lock, so an older reply can be stored over a newer push
	// (before or after the push's callbacks run), or run the callbacks
	// after it. Pass on what the cache holds, with the LastRefTime the
	// server gave it. Read only while no SDK call of ours for the key is
	// in flight (one may be running this callback) and the key is cached,
	// so that GetService cannot send a request.
	g := s.g
	var ref, epoch uint64
	if g.cached.Load() && g.mu.TryLock() {
		if svc, err := g.client.GetService(g.get); err == nil && svc.LastRefTime != 0 {
			hosts, ref, epoch = svc.Hosts, svc.LastRefTime, g.epoch
		}
		g.mu.Unlock()
	}
	g.cached.Store(true)
	list := convert(hosts)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.active.Load() {
		s.passLocked(list, ref, epoch)
	}
}

// passLocked passes list, which the SDK's cache holds with LastRefTime
// ref in epoch (ref 0: unknown), to the sink unless it equals the list
// passed last or is not newer. s.mu must be held.
func (s *sub) passLocked(list []subscriber.Instance, ref, epoch uint64) {
	if ref != 0 && s.ref != 0 && epoch == s.epoch && ref <= s.ref {
		return // not newer than the list passed last
	}
	if ref != 0 {
		s.ref, s.epoch = ref, epoch
	}
	s.updateLocked(list)
}

// convert copies the SDK's instances (which stay in its cache).
func convert(hosts []model.Instance) []subscriber.Instance {
	out := make([]subscriber.Instance, len(hosts))
	for i, h := range hosts {
		out[i] = subscriber.Instance{
			ID:        h.InstanceId,
			IP:        h.Ip,
			Port:      h.Port,
			Weight:    h.Weight,
			Healthy:   h.Healthy,
			Enabled:   h.Enable,
			Ephemeral: h.Ephemeral,
			Cluster:   h.ClusterName,
			Metadata:  maps.Clone(h.Metadata),
		}
	}
	return out
}

// isShutdown reports whether err is the SDK's error for a closed client
// ("client not connected, current status:SHUTDOWN", rpc_client.go).
func isShutdown(err error) bool {
	return err != nil && strings.Contains(err.Error(), "status:SHUTDOWN")
}
