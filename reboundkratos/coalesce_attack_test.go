package reboundkratos_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound/reboundkratos"
)

// stallCore blocks the first Write of a "left out" line until release is
// closed: it holds the watcher's goroutine inside its conversion, the way
// a slow log sink (or a big list) does.
type stallCore struct {
	zapcore.LevelEnabler
	once    chan struct{} // receive to be the one that stalls
	release chan struct{}
}

func (c stallCore) With([]zapcore.Field) zapcore.Core { return c }
func (c stallCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (c stallCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	if strings.Contains(e.Message, "left out") {
		select {
		case <-c.once:
			<-c.release
		default:
		}
	}
	return nil
}
func (c stallCore) Sync() error { return nil }

// TestNextSkipsAChangeWithRoomInTheQueue: a list the Manager delivers
// while the watcher's goroutine is busy converting the previous one (here:
// held in a slow log call) coalesces with the next one in the name's View,
// with 1023 free places in the watcher's queue: Next may skip it, as
// Watch's doc says. What Next returns is still in order, never twice, and
// ends on the last list.
func TestNextSkipsAChangeWithRoomInTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		once := make(chan struct{}, 1)
		once <- struct{}{}
		release := make(chan struct{})
		core := stallCore{LevelEnabler: zapcore.DebugLevel, once: once, release: release}
		st := newMemStack(t, reboundkratos.FormatNacos, reboundkratos.WithLogger(zap.New(core)))
		w, err := st.d.Watch(context.Background(), "orders.grpc")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		synctest.Wait()
		a := nacosInst(9001, "v1")
		a.Healthy = false
		st.reg.Set(orders, a) // converted to [] and logged: the goroutine stalls in the log call
		synctest.Wait()
		st.reg.Set(orders, nacosInst(9002, "v1")) // delivered by the Manager...
		synctest.Wait()
		st.reg.Set(orders, nacosInst(9003, "v1")) // ...and so is this one
		synctest.Wait()
		delivered := st.m.Status()[0].Deliveries
		close(release)
		synctest.Wait()
		var got []string
		for {
			s := recv(t, nextAsync(w))
			if s == "(blocked)" {
				break
			}
			got = append(got, s)
		}
		// The first list (none set yet), then a, b, c: Next returns a
		// subsequence of them (in order, none twice) that ends on c.
		all := []string{"[]", "[]", "[9002]", "[9003]"}
		i := 0
		for _, s := range got {
			for i < len(all) && all[i] != s {
				i++
			}
			if i == len(all) {
				t.Fatalf("the Manager delivered %d lists; Next returned %v: out of order or twice (lists: %v)", delivered, got, all)
			}
			i++
		}
		if len(got) == 0 || got[len(got)-1] != all[len(all)-1] {
			t.Fatalf("the Manager delivered %d lists; Next returned %v, want the last list %s last", delivered, got, all[len(all)-1])
		}
		t.Logf("the Manager delivered %d lists; Next returned %v", delivered, got)
	})
}
