package nacostest

import (
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
)

// ClientConfig returns the nacos-sdk-go client configuration for a test t
// against a Server (see the package doc for why each field): TimeoutMs
// 1000, NotLoadCacheAtStart, UpdateCacheWhenEmpty (else an empty list is
// never delivered), CacheDir(t), LogDir(), LogLevel "error", and TLS
// environment variables ignored. Change any field before passing it to
// clients.NewNamingClient with the servers' ServerConfig.
func ClientConfig(t testing.TB) *constant.ClientConfig {
	return &constant.ClientConfig{
		TimeoutMs:            1000,
		NotLoadCacheAtStart:  true,
		UpdateCacheWhenEmpty: true,
		CacheDir:             CacheDir(t),
		LogDir:               LogDir(),
		LogLevel:             "error",
		TLSCfg:               constant.TLSConfig{Appointed: true},
	}
}
