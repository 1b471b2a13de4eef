package nacostest

import (
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"

	"github.com/rebound-go/rebound"
)

// ClientConfig returns the nacos-sdk-go client configuration for a test t
// against a Server: NewClientConfig with CacheDir(t).
func ClientConfig(t testing.TB) *constant.ClientConfig {
	c, err := NewClientConfig(CacheDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewClientConfig returns the nacos-sdk-go client configuration for a
// client against a Server (see the package doc for why each field), for
// programs with no testing.TB (a demo, a local development loop):
// TimeoutMs 1000, NotLoadCacheAtStart, UpdateCacheWhenEmpty (else an empty
// list is never delivered), CacheDir cacheDir, LogDir(), LogLevel "error",
// and TLS environment variables ignored. cacheDir must not be empty: give
// each client a directory of its own (os.MkdirTemp) and remove it with
// RemoveDir when the program ends. Change any field before passing it to
// clients.NewNamingClient with the servers' ServerConfig.
func NewClientConfig(cacheDir string) (*constant.ClientConfig, error) {
	if cacheDir == "" {
		return nil, &rebound.ArgumentError{Func: "nacostest.NewClientConfig", Arg: "cacheDir", Reason: "is empty (the SDK would write its cache to the working directory)"}
	}
	return &constant.ClientConfig{
		TimeoutMs:            1000,
		NotLoadCacheAtStart:  true,
		UpdateCacheWhenEmpty: true,
		CacheDir:             cacheDir,
		LogDir:               LogDir(),
		LogLevel:             "error",
		TLSCfg:               constant.TLSConfig{Appointed: true},
	}, nil
}
