package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// urlLayout stores each instance as its endpoint URL, and names the value
// in a decode error, as reboundkratos.EtcdLayout names the endpoints.
type urlLayout struct{}

func (urlLayout) ServicePrefix(key subscriber.Key) (string, error) {
	return etcdreg.ServicePrefix(etcdreg.DefaultPrefix, key)
}

func (urlLayout) Decode(id string, value []byte) (subscriber.Instance, error) {
	u, err := url.Parse(string(value))
	if err != nil {
		return subscriber.Instance{}, err
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return subscriber.Instance{}, fmt.Errorf("instance %q: no host:port in %q", id, value)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return subscriber.Instance{ID: id, IP: host, Port: p, Weight: 1, Healthy: true, Enabled: true}, err
}

func (urlLayout) Encode(subscriber.Instance) (string, []byte, error) {
	return "", nil, errors.New("urlLayout: read only")
}

// TestLogsScrubEndpointCredentials: an endpoint with a user and password
// that a layout names in its error reaches the adapter's Warn line without
// the password.
func TestLogsScrubEndpointCredentials(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	key := subscriber.Key{Service: "creds"}
	k, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, key, "p1")
	if err != nil {
		t.Fatal(err)
	}
	write(t, "put "+k, func(ctx context.Context) error {
		_, err := cli.Put(ctx, k, "grpc://svc:s3cret@10.0.0.9")
		return err
	})
	core, logs := observer.New(zapcore.DebugLevel)
	reg := newRegistry(t, cli, etcdreg.WithLayout(urlLayout{}), etcdreg.WithLogger(zap.New(core)))
	m := newManager(t, reg)
	var rec recorder
	if _, err := m.Subscribe(context.Background(), key, rec.listener); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the undecodable instance logged", func() bool {
		return logs.FilterMessageSnippet("undecodable").Len() > 0
	})
	for _, e := range logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, "s3cret") {
			t.Errorf("a log line carries the password: %s", line)
		}
	}
	if line := fmt.Sprint(logs.FilterMessageSnippet("undecodable").All()[0].ContextMap()); !strings.Contains(line, "svc:") {
		t.Errorf("the line does not name the endpoint: %s", line)
	}
}
