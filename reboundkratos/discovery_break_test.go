package reboundkratos_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestNextCoalescesInOrder: a watcher that is not read while the Manager
// delivers list after list, faster than the Discovery converts them, gets
// them in order, never twice, and ends on the latest; lists delivered
// while the previous one was being converted may be skipped (the name's
// view keeps only the latest), as Watch's doc says. No more lists reach
// Next than the Manager delivered.
func TestNextCoalescesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos, reboundkratos.WithMaxPending(10000))
		st.reg.Set(orders, nacosInst(1000, "v1"))
		w, err := st.d.Watch(context.Background(), "orders.grpc")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		synctest.Wait()
		// Each list changes every one of its 300 instances: the Discovery
		// converts each one (slow), the Manager only hands the list over.
		const n = 200
		for p := 1001; p <= 1000+n; p++ {
			list := []subscriber.Instance{nacosInst(p, "v1")}
			for i := range 299 {
				list = append(list, nacosInst(20000+i, strconv.Itoa(p)))
			}
			st.reg.Set(orders, list...)
		}
		synctest.Wait()
		delivered := st.m.Status()[0].Deliveries
		var got []int
		for {
			s := recv(t, nextAsync(w))
			if s == "(blocked)" {
				break
			}
			p, err := strconv.Atoi(strings.FieldsFunc(s, func(r rune) bool { return r == '[' || r == ',' || r == ']' })[0])
			if err != nil {
				t.Fatalf("Next = %s", s)
			}
			if len(got) > 0 && p <= got[len(got)-1] {
				t.Fatalf("Next = %d after %d: out of order or twice", p, got[len(got)-1])
			}
			got = append(got, p)
		}
		if got[len(got)-1] != 1000+n {
			t.Fatalf("last Next = %d, want %d", got[len(got)-1], 1000+n)
		}
		t.Logf("the Manager delivered %d lists, the watcher got %d", delivered, len(got))
		if len(got) > delivered {
			t.Fatalf("the Manager delivered %d lists, the watcher got %d", delivered, len(got))
		}
	})
}

// TestCloseEndsGetServiceWaiting: a GetService waiting for a first list
// that the registry (down) cannot give returns ErrClosed when the
// Discovery is closed; it waited for its ctx.
func TestCloseEndsGetServiceWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.SetDown(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := st.d.GetService(ctx, "orders.grpc")
			errc <- err
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		_ = st.d.Close()
		synctest.Wait()
		select {
		case err := <-errc:
			if !errors.Is(err, reboundkratos.ErrClosed) {
				t.Fatalf("GetService after Close: %v, want ErrClosed", err)
			}
		default:
			t.Fatal("GetService still waiting after the Discovery's Close")
		}
	})
}

// TestKeyFuncPanicLeavesDiscoveryUsable: a WithKeyFunc function that
// panics (the panic reaching a caller that recovers it, as an HTTP
// server does) leaves the Discovery usable: the function runs with no
// lock held. It ran under the Discovery's mutex, which the panic left
// locked: every later Watch, GetService, Stop and Close hung.
func TestKeyFuncPanicLeavesDiscoveryUsable(t *testing.T) {
	reg := subscribertest.New()
	reg.Set(orders, nacosInst(9001, "v1"))
	m, err := subscriber.New(reg, subscriber.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	keyOf := func(name string) (subscriber.Key, error) {
		if name == "boom" {
			panic("key bug")
		}
		return subscriber.Key{Service: name}, nil
	}
	d, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos, reboundkratos.WithKeyFunc(keyOf))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_, err := d.Watch(context.Background(), "boom")
		if err == nil {
			t.Error("Watch of a name whose key function panicked succeeded")
		}
	}()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := d.GetService(ctx, "orders.grpc")
		if err == nil {
			err = d.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("GetService after a key function panicked: %v", err)
		}
	case <-time.After(20 * time.Second): // a hang, not a timing
		t.Fatal("the Discovery hangs after a key function panicked")
	}
}
