package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// consumer is one consumer process: a nacos-sdk-go naming client and the
// code that subscribes it to every service.
type consumer interface {
	// start subscribes to services[i] with watches[i] as the listener, in
	// the background; it returns at once.
	start(services []string, watches []*watch) error
	// confirmed is how many subscriptions the consumer's code believes are
	// in place.
	confirmed() int
	// gaveUp is how many subscriptions the consumer's code abandoned.
	gaveUp() int
	// close stops the consumer's code (not the SDK client) and waits for
	// its goroutines, bounded by ctx.
	close(ctx context.Context) error
}

// sdkConsumer is nacos-sdk-go alone: one client.Subscribe per service when
// the consumer starts, its error ignored (the SDK registered the callback
// and its redo entry before sending, so its redo subscribes again after
// every reconnect). It believes every subscription is in place once it
// made its calls.
type sdkConsumer struct {
	client    naming_client.INamingClient
	onAttempt func()
	done      atomic.Int64
	wg        sync.WaitGroup
	stop      atomic.Bool
}

func newSDKConsumer(client naming_client.INamingClient, onAttempt func()) *sdkConsumer {
	return &sdkConsumer{client: client, onAttempt: onAttempt}
}

func (c *sdkConsumer) start(services []string, watches []*watch) error {
	c.wg.Go(func() {
		for i, svc := range services {
			if c.stop.Load() {
				return
			}
			c.onAttempt()
			_ = c.client.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: watches[i].sdkCallback})
			c.done.Add(1)
		}
	})
	return nil
}

func (c *sdkConsumer) confirmed() int { return int(c.done.Load()) }
func (c *sdkConsumer) gaveUp() int    { return 0 }

func (c *sdkConsumer) close(ctx context.Context) error {
	c.stop.Store(true)
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sdk consumer: the subscribe calls did not stop: %w", ctx.Err())
	}
}

// naiveInterval is the naive loop's sleep between attempts.
const naiveInterval = time.Second

// naiveConsumer is the subscribe loop most code has, run once per service
// when the consumer starts, one service after the other:
//
//	for {
//		err := client.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: onChange})
//		if err == nil {
//			break
//		}
//		time.Sleep(1 * time.Second)
//	}
//
// After that it relies on nacos-sdk-go's own redo to resubscribe after a
// reconnect. Every Subscribe call, failed or not, appends onChange to the
// SDK's callbacks for the service once more (the SDK does not de-duplicate
// them), so each later change is delivered once per call made.
//
// The sleep here selects on a context instead of calling time.Sleep, only
// so that the demo can stop the loop; it waits just as long. With noSleep
// the loop retries at once (each failed call still takes the SDK about
// 300 ms while it is disconnected) and gives up after maxAttempts calls
// for one service, a cap this demo adds so that it cannot spin forever.
type naiveConsumer struct {
	client      naming_client.INamingClient
	noSleep     bool
	maxAttempts int
	onAttempt   func()

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	done  atomic.Int64
	given atomic.Int64
}

// newNaiveConsumer returns a naive consumer of client; onAttempt is called
// before every Subscribe call.
func newNaiveConsumer(client naming_client.INamingClient, noSleep bool, maxAttempts int, onAttempt func()) *naiveConsumer {
	ctx, cancel := context.WithCancel(context.Background())
	return &naiveConsumer{client: client, noSleep: noSleep, maxAttempts: maxAttempts, onAttempt: onAttempt, ctx: ctx, cancel: cancel}
}

func (c *naiveConsumer) start(services []string, watches []*watch) error {
	c.wg.Go(func() {
		for i, svc := range services {
			if !c.subscribe(svc, watches[i]) {
				return
			}
		}
	})
	return nil
}

// subscribe is the naive loop for one service. It reports false when the
// demo stopped it.
func (c *naiveConsumer) subscribe(svc string, w *watch) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for attempt := 1; ; attempt++ {
		if c.ctx.Err() != nil {
			return false
		}
		c.onAttempt()
		err := c.client.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: w.sdkCallback})
		if err == nil {
			c.done.Add(1)
			return true
		}
		if c.noSleep {
			if attempt >= c.maxAttempts {
				c.given.Add(1)
				return true // this service is abandoned; go on with the next
			}
			continue
		}
		// time.Sleep(1 * time.Second), but the demo can stop it:
		if timer == nil {
			timer = time.NewTimer(naiveInterval)
		} else {
			timer.Reset(naiveInterval)
		}
		select {
		case <-timer.C:
		case <-c.ctx.Done():
			return false
		}
	}
}

func (c *naiveConsumer) confirmed() int { return int(c.done.Load()) }
func (c *naiveConsumer) gaveUp() int    { return int(c.given.Load()) }

func (c *naiveConsumer) close(ctx context.Context) error {
	c.cancel()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("naive consumer: the subscribe loop did not stop: %w", ctx.Err())
	}
}

// reboundConsumer subscribes through a subscriber.Manager over the
// subscriber/nacos adapter, one Manager per consumer process (so each has
// its own shared limiter).
type reboundConsumer struct {
	m    *subscriber.Manager
	live *live // -serve (serve.go); nil otherwise

	mu   sync.Mutex
	subs []*subscriber.Subscription
}

// newReboundConsumer returns a rebound consumer of client: a Manager with
// policy and the default shared limiter; onAttempt is called before every
// Registry.Subscribe call the Manager makes.
func newReboundConsumer(client naming_client.INamingClient, policy rebound.Policy, onAttempt func(), extra ...subscriber.Option) (*reboundConsumer, error) {
	reg, err := nacos.New(client)
	if err != nil {
		return nil, err
	}
	m, err := subscriber.New(countingRegistry{Registry: reg, onAttempt: onAttempt}, append([]subscriber.Option{subscriber.WithPolicy(policy)}, extra...)...)
	if err != nil {
		return nil, err
	}
	return &reboundConsumer{m: m}, nil
}

func (c *reboundConsumer) start(services []string, watches []*watch) error {
	for i, svc := range services {
		s, err := c.m.Subscribe(context.Background(), subscriber.Key{Service: svc}, watches[i].listener)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.subs = append(c.subs, s)
		c.mu.Unlock()
	}
	return nil
}

func (c *reboundConsumer) confirmed() int {
	n := 0
	for _, st := range c.m.Status() {
		if st.State == subscriber.StateSubscribed {
			n++
		}
	}
	return n
}

// unconfirmed describes, one line each, the Manager's Status of the
// subscriptions not in StateSubscribed: printed when the recovery did not
// converge within -timeout, to say where each one stands.
func (c *reboundConsumer) unconfirmed() []string {
	var out []string
	for _, st := range c.m.Status() {
		if st.State == subscriber.StateSubscribed {
			continue
		}
		out = append(out, fmt.Sprintf("%v state=%v since=%s attempts=%d/%d lastErr=%v instances=%d deliveries=%d confirmedAt=%s reason=%q confirmDeadline=%s heldSince=%s heldUntil=%s heldReason=%q",
			st.Key, st.State, st.Since.Format("15:04:05.000"), st.Attempts, st.TotalAttempts, st.LastErr, st.Instances, st.Deliveries,
			st.ConfirmedAt.Format("15:04:05.000"), st.ConfirmReason, st.ConfirmDeadline.Format("15:04:05.000"),
			st.HeldSince.Format("15:04:05.000"), st.HeldUntil.Format("15:04:05.000"), st.HeldReason))
	}
	return out
}

// gaveUp counts the subscriptions that stopped (only a permanent registry
// error stops one before Close).
func (c *reboundConsumer) gaveUp() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.subs {
		select {
		case <-s.Done():
			n++
		default:
		}
	}
	return n
}

func (c *reboundConsumer) close(ctx context.Context) error {
	c.live.closing(c)
	return c.m.Shutdown(ctx)
}

// countingRegistry calls onAttempt before each Subscribe call of the
// Registry it embeds (which also provides Unsubscribe and
// MonitorConnection).
type countingRegistry struct {
	*nacos.Registry
	onAttempt func()
}

// Subscribe implements subscriber.Registry.
func (r countingRegistry) Subscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	r.onAttempt()
	return r.Registry.Subscribe(ctx, key, sink)
}
