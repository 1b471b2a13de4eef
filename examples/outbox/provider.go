package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundpg"
)

// provider is the flaky receiver: down until up, then it applies every
// call but loses one answer in ten (the sender retries a call that was
// applied: a duplicate). It applies calls through reboundpg.Dedupe, in
// its own table, so that a duplicate is seen but not applied twice.
type provider struct {
	url    string
	srv    *http.Server
	pool   *pgxpool.Pool
	dedupe *reboundpg.Dedupe

	mu      sync.Mutex
	isUp    bool
	last    map[string]string    // key -> replica of its last attempt
	ok      map[string]int       // key -> deliveries (answered or not)
	first   map[string]time.Time // key -> first delivery
	applied int
	rng     *rand.Rand
}

func startProvider(ctx context.Context, dsn, mode string) (*provider, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	d, err := reboundpg.NewDedupe(ctx, pool, "provider_applied_"+mode)
	if err != nil {
		pool.Close()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		return nil, err
	}
	p := &provider{url: "http://" + l.Addr().String(), pool: pool, dedupe: d, last: map[string]string{},
		ok: map[string]int{}, first: map[string]time.Time{}, rng: rand.New(rand.NewPCG(7, 7))}
	p.srv = &http.Server{Handler: p}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, replica := r.Header.Get(failback.IdempotencyKey), r.Header.Get("X-Replica")
	p.mu.Lock()
	p.last[key] = replica
	up := p.isUp
	lose := p.rng.IntN(10) == 0
	p.mu.Unlock()
	if !up {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	ctx := r.Context()
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer tx.Rollback(ctx)
	first, err := p.dedupe.Apply(ctx, tx, key)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	p.mu.Lock()
	p.ok[key]++
	if _, ok := p.first[key]; !ok {
		p.first[key] = time.Now()
	}
	if first {
		p.applied++
	}
	p.mu.Unlock()
	if lose {
		http.Error(w, "answer lost", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (p *provider) up() { p.mu.Lock(); p.isUp = true; p.mu.Unlock() }

// heldBy returns the undelivered keys whose last attempt came from replica.
func (p *provider) heldBy(replica string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []string
	for k, r := range p.last {
		if r == replica && p.ok[k] == 0 {
			keys = append(keys, k)
		}
	}
	return keys
}

func (p *provider) delivered() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.ok) }

// counts returns the keys delivered, the duplicate deliveries and the
// calls applied after dedupe.
func (p *provider) counts() (delivered, dups, applied int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.ok {
		dups += n - 1
	}
	return len(p.ok), dups, p.applied
}

func (p *provider) firstOK(key string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.first[key]
	return t, ok
}

func (p *provider) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	p.pool.Close()
}
