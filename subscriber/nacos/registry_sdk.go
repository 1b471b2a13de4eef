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
	s.g.cached.Store(true)
	list := convert(hosts)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.active.Load() {
		s.updateLocked(list)
	}
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
