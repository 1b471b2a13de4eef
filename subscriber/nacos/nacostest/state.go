package nacostest

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
)

// Instance is a service instance as nacos-sdk-go sees it. The server stores
// Weight, Healthy, Enable and Metadata as given, like Nacos: an instance with
// Enable false is kept (see [Server.Instances]) but hidden from subscribers,
// and an instance with Weight 0 or Healthy false is delivered but skipped by
// the SDK's Select* helpers. ClusterName defaults to [DefaultCluster];
// ServiceName, InstanceId and Ephemeral are filled in by the server.
type Instance = model.Instance

// svcKey names a service. Namespace and group are normalized (never empty).
type svcKey struct {
	namespace, group, name string
}

func makeSvcKey(namespace, group, name string) svcKey {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if group == "" {
		group = DefaultGroup
	}
	return svcKey{namespace: namespace, group: group, name: name}
}

func (k svcKey) grouped() string { return k.group + "@@" + k.name }

// instKey identifies an instance within a service.
type instKey struct {
	ip      string
	port    uint64
	cluster string
}

func keyOf(in model.Instance) instKey {
	c := in.ClusterName
	if c == "" {
		c = DefaultCluster
	}
	return instKey{ip: in.Ip, port: in.Port, cluster: c}
}

// published is one stored instance; seq orders publications so that, when
// several publishers hold the same ip:port:cluster, the latest one wins.
type published struct {
	inst model.Instance
	seq  uint64
}

// subscription is what one connection subscribed to: a service and the
// clusters string the client sent, echoed back verbatim in service infos.
type subscription struct {
	svc      svcKey
	clusters string
}

// subEcho keeps the group and service names as the client spelled them.
type subEcho struct {
	group, name string
}

// normalize fills in the fields Nacos fills in and copies the metadata so
// the stored instance shares nothing with the caller.
func normalize(k svcKey, in model.Instance) model.Instance {
	out := in
	if out.ClusterName == "" {
		out.ClusterName = DefaultCluster
	}
	out.ServiceName = k.grouped()
	if out.InstanceId == "" {
		out.InstanceId = out.Ip + "#" + strconv.FormatUint(out.Port, 10) + "#" + out.ClusterName + "#" + k.grouped()
	}
	out.Ephemeral = true
	out.Metadata = maps.Clone(in.Metadata)
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if out.InstanceHeartBeatInterval == 0 {
		out.InstanceHeartBeatInterval = 5000
	}
	if out.InstanceHeartBeatTimeOut == 0 {
		out.InstanceHeartBeatTimeOut = 15000
	}
	if out.IpDeleteTimeout == 0 {
		out.IpDeleteTimeout = 30000
	}
	return out
}

func cloneInstance(in model.Instance) model.Instance {
	in.Metadata = maps.Clone(in.Metadata)
	return in
}

func validateInstance(service string, in model.Instance) error {
	if service == "" {
		return fmt.Errorf("nacostest: service name is empty")
	}
	if in.Ip == "" {
		return fmt.Errorf("nacostest: instance of service %q: Ip is empty", service)
	}
	if in.Port > 65535 {
		return fmt.Errorf("nacostest: instance %s of service %q: Port %d is out of range 0..65535", in.Ip, service, in.Port)
	}
	return nil
}

func compareInstances(a, b model.Instance) int {
	if c := strings.Compare(a.Ip, b.Ip); c != 0 {
		return c
	}
	if a.Port != b.Port {
		if a.Port < b.Port {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ClusterName, b.ClusterName)
}

// hostsLocked returns every instance of k (the union over the server's own
// registrations and every connection's), sorted by ip, port and cluster.
// The instances share their metadata maps with the store: callers must not
// modify them. s.mu must be held.
func (s *Server) hostsLocked(k svcKey) []model.Instance {
	best := map[instKey]published{}
	add := func(p published) {
		ik := keyOf(p.inst)
		if old, ok := best[ik]; !ok || p.seq > old.seq {
			best[ik] = p
		}
	}
	for _, p := range s.own[k] {
		add(p)
	}
	for _, c := range s.conns {
		for _, p := range c.published[k] {
			add(p)
		}
	}
	s.syncedHostsLocked(k, add)
	out := make([]model.Instance, 0, len(best))
	for ik, p := range best {
		if e, ok := s.edits[k][ik]; ok {
			p.inst = e.apply(p.inst)
		}
		out = append(out, p.inst)
	}
	slices.SortFunc(out, compareInstances)
	return out
}

// serviceInfoLocked builds the service info a subscriber of (k, clusters)
// sees, like Nacos' ServiceUtil.selectInstancesWithHealthyProtection with
// enableOnly: instances filtered by the comma-separated clusters (all when
// empty), disabled instances hidden, unhealthy ones hidden only when
// healthyOnly. Every call takes a new, strictly greater lastRefTime, so the
// order of lastRefTime values is the order of the snapshots. s.mu must be
// held.
func (s *Server) serviceInfoLocked(k svcKey, echo subEcho, clusters string, healthyOnly bool) model.Service {
	var want map[string]bool
	if strings.TrimSpace(clusters) != "" {
		want = map[string]bool{}
		for _, c := range strings.Split(clusters, ",") {
			want[c] = true
		}
	}
	hosts := []model.Instance{}
	for _, in := range s.hostsLocked(k) {
		if want != nil && !want[in.ClusterName] {
			continue
		}
		if !in.Enable || (healthyOnly && !in.Healthy) {
			continue
		}
		hosts = append(hosts, in)
	}
	return model.Service{
		CacheMillis: uint64(s.opts.cacheMillis),
		Hosts:       hosts,
		Checksum:    checksum(hosts),
		LastRefTime: uint64(nextRefTime()),
		Clusters:    clusters,
		Name:        echo.name,
		GroupName:   echo.group,
		Valid:       true,
	}
}

func checksum(hosts []model.Instance) string {
	b, _ := json.Marshal(hosts) // cannot fail: plain data
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// mutateLocked runs fn, which changes the instances of k, and schedules a
// push to every subscriber of k when the instance list changed. s.mu must be
// held.
func (s *Server) mutateLocked(k svcKey, fn func()) {
	before := s.hostsLocked(k)
	fn()
	after := s.hostsLocked(k)
	if !equalHosts(before, after) {
		s.notifyLocked(k)
	}
}

// notifyLocked marks every subscription to k dirty and wakes the
// connections' stream loops, which build and send the pushes. Marking is
// idempotent, so bursts of changes coalesce into one push per subscription
// carrying the latest state. s.mu must be held.
func (s *Server) notifyLocked(k svcKey) {
	for _, c := range s.conns {
		marked := false
		for sub := range c.subs {
			if sub.svc == k {
				c.dirty[sub] = struct{}{}
				marked = true
			}
		}
		if marked {
			c.wakeUp()
		}
	}
}

func (s *Server) nextSeqLocked() uint64 {
	if s.cluster != nil {
		return s.cluster.seq.Add(1)
	}
	s.seq++
	return s.seq
}

// RegisterInstance adds inst to service in the given namespace and group,
// or replaces the instance with the same Ip, Port and ClusterName, and pushes
// the new list to the service's subscribers if it changed. An empty
// namespace means [DefaultNamespace], an empty group [DefaultGroup]. The
// instance belongs to the server, not to a connection: it stays until
// [Server.DeregisterInstance] or [Server.Stop]. It may be called while the
// server is stopped to seed the next [Server.Start].
//
// It returns an error naming the bad argument when service or inst.Ip is
// empty or inst.Port is above 65535. Safe for concurrent use.
func (s *Server) RegisterInstance(namespace, group, service string, inst Instance) error {
	if err := validateInstance(service, inst); err != nil {
		return err
	}
	k := makeSvcKey(namespace, group, service)
	in := normalize(k, inst)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mutateLocked(k, func() {
		m := s.own[k]
		if m == nil {
			m = map[instKey]published{}
			s.own[k] = m
		}
		m[keyOf(in)] = published{inst: in, seq: s.nextSeqLocked()}
	})
	return nil
}

// edit is an operator's edit of an instance (UpdateInstance).
type edit struct {
	weight   float64
	enable   bool
	metadata map[string]string
}

// apply returns in as the edit shows it; its metadata map is a new one.
func (e edit) apply(in model.Instance) model.Instance {
	in.Weight, in.Enable = e.weight, e.enable
	md := maps.Clone(in.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	maps.Copy(md, e.metadata)
	in.Metadata = md
	return in
}

// UpdateInstance edits the instance of service with inst's Ip, Port and
// ClusterName as Nacos' console and open API (PUT /nacos/v2/ns/instance)
// do: the server lists it with inst's Weight and Enable, and inst's
// Metadata added to its own, whoever registered it. Like Nacos, the
// server keeps the edit apart from the registration: a client
// registering the instance again does not undo it (an operator's
// disable stays), and it applies to the address while the server runs.
// The edit is pushed to the service's subscribers. It returns an error
// naming the bad argument when service or inst.Ip is empty or inst.Port
// is above 65535. Safe for concurrent use.
func (s *Server) UpdateInstance(namespace, group, service string, inst Instance) error {
	if err := validateInstance(service, inst); err != nil {
		return err
	}
	k := makeSvcKey(namespace, group, service)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mutateLocked(k, func() {
		m := s.edits[k]
		if m == nil {
			m = map[instKey]edit{}
			s.edits[k] = m
		}
		m[keyOf(inst)] = edit{weight: inst.Weight, enable: inst.Enable, metadata: maps.Clone(inst.Metadata)}
	})
	return nil
}

// DeregisterInstance removes the instance of service whose Ip, Port and
// ClusterName (empty meaning [DefaultCluster]) match inst, whoever registered
// it: the server or any connection. It pushes the new list to the service's
// subscribers and reports whether anything was removed. A client whose
// instance was removed this way registers it again after its next reconnect
// (the SDK's redo). Safe for concurrent use.
func (s *Server) DeregisterInstance(namespace, group, service string, inst Instance) bool {
	k := makeSvcKey(namespace, group, service)
	ik := keyOf(inst)
	removed := false
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mutateLocked(k, func() {
		if _, ok := s.own[k][ik]; ok {
			delete(s.own[k], ik)
			removed = true
		}
		for _, c := range s.conns {
			ps := c.published[k]
			kept := slices.DeleteFunc(slices.Clone(ps), func(p published) bool { return keyOf(p.inst) == ik })
			if len(kept) != len(ps) {
				removed = true
				if len(kept) == 0 {
					delete(c.published, k)
				} else {
					c.published[k] = kept
				}
				s.syncConnLocked(c)
			}
		}
	})
	return removed
}

// Instances returns a copy of every instance of service, registered by the
// server or by any connection, including disabled and unhealthy ones (which
// subscribers may not see), sorted by Ip, Port and ClusterName. It returns
// an empty, non-nil slice when there is none. Safe for concurrent use.
func (s *Server) Instances(namespace, group, service string) []Instance {
	k := makeSvcKey(namespace, group, service)
	s.mu.Lock()
	hosts := s.hostsLocked(k)
	s.mu.Unlock()
	for i := range hosts {
		hosts[i] = cloneInstance(hosts[i])
	}
	return hosts
}

// SubscriberCount returns how many subscriptions connections hold on the
// service: one per connection and clusters string. Safe for concurrent use.
func (s *Server) SubscriberCount(namespace, group, service string) int {
	k := makeSvcKey(namespace, group, service)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		for sub := range c.subs {
			if sub.svc == k {
				n++
			}
		}
	}
	return n
}

// PendingPushes returns how many pushes are queued and not yet taken for
// sending, over every connection (one per subscription with a change to
// push). A test that loses a push with [Server.LoseNextPush] waits for 0
// first, so that the push it loses is the one of its next change, not the
// push that follows a subscribe (queued with the reply by default). Pushes
// that [WithSubscribePush]'s delay has not made due yet are not counted.
// Safe for concurrent use.
func (s *Server) PendingPushes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		n += len(c.dirty)
	}
	return n
}

// ConnectionCount returns the number of client connections with an open
// bi-directional stream. Safe for concurrent use.
func (s *Server) ConnectionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// serviceNamesLocked lists the services of a namespace and group that have
// at least one instance, sorted. s.mu must be held.
func (s *Server) serviceNamesLocked(namespace, group string) []string {
	seen := map[svcKey]bool{}
	consider := func(k svcKey, n int) {
		if n > 0 && k.namespace == namespace && k.group == group {
			seen[k] = true
		}
	}
	for k, m := range s.own {
		consider(k, len(m))
	}
	for _, c := range s.conns {
		for k, ps := range c.published {
			consider(k, len(ps))
		}
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k.name)
	}
	slices.Sort(names)
	return names
}
