package nacostest

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Option configures a [Server] created by [NewServer].
type Option interface {
	apply(*options) error
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

type options struct {
	addr          string
	cacheMillis   int64
	hook          func(requestType string)
	logger        *zap.Logger
	subscribePush time.Duration // < 0: none
}

func defaultOptions() options {
	return options{
		addr:        "127.0.0.1:0",
		cacheMillis: 10000,
		logger:      zap.NewNop(),
	}
}

// WithAddr sets the address the server listens on, "host:port". The default
// is "127.0.0.1:0": a free port on the IPv4 loopback. The host must be an
// IPv4 address, "localhost" (which means 127.0.0.1) or empty (all IPv4
// interfaces, dialled as 127.0.0.1); nacos-sdk-go cannot dial IPv6 literals.
// A port of 0 picks a free port once, in NewServer; [Server.Start] reuses it.
func WithAddr(addr string) Option {
	return optionFunc(func(o *options) error {
		o.addr = addr
		return nil
	})
}

// WithCacheMillis sets the cacheMillis field of the service infos the
// server sends (default 10 s, Nacos' default). nacos-sdk-go only uses it
// with ClientConfig.AsyncUpdateService, to decide when to poll a service
// again. d must be at least one millisecond.
func WithCacheMillis(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d < time.Millisecond {
			return fmt.Errorf("nacostest: WithCacheMillis: duration %v is below 1ms", d)
		}
		o.cacheMillis = d.Milliseconds()
		return nil
	})
}

// WithRequestHook installs a function called once for every request the
// server receives, with its type (for example [RequestSubscribeService]),
// before any injected delay or fault is applied. It is called from the
// server's connection goroutines, concurrently and without locks held: it
// must be safe for concurrent use and return quickly. A nil hook is allowed
// and means none (the default). [Server.Stats] counts the same requests.
func WithRequestHook(hook func(requestType string)) Option {
	return optionFunc(func(o *options) error {
		o.hook = hook
		return nil
	})
}

// WithLogger sets the logger the server writes connection and push events
// to (at Debug) and unexpected conditions to (at Warn). The default is a
// no-op logger; nil also means no-op.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(o *options) error {
		if l == nil {
			l = zap.NewNop()
		}
		o.logger = l
		return nil
	})
}

// WithSubscribePush sets the delay of the push the server sends a
// connection after each subscribe request, as Nacos 2.x does (it publishes
// a ServiceSubscribedEvent and pushes the service to that client after
// pushTaskDelay, 500 ms by default). The push carries the current list with
// a new lastRefTime, so the SDK's cached lastRefTime of the key moves
// forward although nothing changed (no callback runs). The default is 0:
// the push is queued with the reply. d must not be negative; use
// [WithoutSubscribePush] for a server that does not push on subscribe.
func WithSubscribePush(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d < 0 {
			return fmt.Errorf("nacostest: WithSubscribePush: delay %v is negative", d)
		}
		o.subscribePush = d
		return nil
	})
}

// WithoutSubscribePush makes the server push only on changes, never after a
// subscribe (Nacos 1.x behaviour, and nacostest's before it learnt the
// Nacos 2.x push).
func WithoutSubscribePush() Option {
	return optionFunc(func(o *options) error {
		o.subscribePush = -1
		return nil
	})
}
