package failback

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/cluster"
)

// panicCodec panics in Marshal and, for the method "bad", in Unmarshal (a
// user's codec meeting a type it does not know, or bytes it cannot read).
type panicCodec struct{ jsonCodec }

func (c panicCodec) Marshal(method string, args []any) ([]byte, error) {
	if method == "bad" {
		panic("codec: cannot encode")
	}
	return c.jsonCodec.Marshal(method, args)
}

func (c panicCodec) Unmarshal(method string, data []byte) ([]any, error) {
	if method == "bad" {
		panic("codec: cannot decode")
	}
	return c.jsonCodec.Unmarshal(method, data)
}

// A Codec panicking in Marshal left the call reserved for ever: Stats
// showed it queued, and Shutdown waited for it until its deadline.
func TestCodecMarshalPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused)))
		f := mustNew(t, dir, WithStore(newMemStore(), panicCodec{}))
		func() {
			defer func() { _ = recover() }()
			_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "bad"})
			if !errors.Is(err, ErrStore) || !errors.Is(err, errPanicked) {
				t.Errorf("Invoke with a Marshal that panics = %v; want ErrStore and errPanicked", err)
			}
		}()
		if s := f.Stats(); s.Queued != 0 || s.Dropped[ErrStore] != 1 {
			t.Errorf("after a Marshal panic: %+v; want nothing queued, 1 ErrStore", s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown after a Marshal panic = %v; want nil (nothing queued)", err)
		}
		mustClose(t, f)
	})
}

// A Codec panicking in Unmarshal at New killed the process instead of
// failing New (or, with WithQuarantine, setting the record aside).
func TestCodecUnmarshalPanics(t *testing.T) {
	st := newMemStore()
	now := time.Now()
	st.Add(StoredCall{Method: "good", Args: []byte(`[1]`), Attempts: 1, Born: now, Due: now})
	st.Add(StoredCall{Method: "bad", Args: []byte(`[2]`), Attempts: 1, Born: now, Due: now})
	dir := cluster.NewStaticDirectory(newProvider("a:1", nil))
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("New with an Unmarshal that panics: panic %v", r)
			}
		}()
		_, err = New(dir, WithStore(st, panicCodec{}))
	}()
	var bre *badRecordError
	if !errors.As(err, &bre) || bre.ID != 2 || !errors.Is(err, errPanicked) {
		t.Errorf("New with an Unmarshal that panics = %v; want a *badRecordError for call 2 wrapping errPanicked", err)
	}
	synctest.Test(t, func(t *testing.T) {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("New WithQuarantine with an Unmarshal that panics: panic %v", r)
				}
			}()
			f, err := New(dir, WithStore(st, panicCodec{}), WithQuarantine())
			if err != nil {
				t.Errorf("New WithQuarantine = %v", err)
				return
			}
			if s := f.Stats(); s.Quarantined != 1 || s.Offered != 1 {
				t.Errorf("%+v; want 1 quarantined, 1 loaded", s)
			}
			mustClose(t, f)
		}()
	})
}

// panicStore panics in Update and Remove (a user's Store with a bug).
type panicStore struct{ *memStore }

func (panicStore) Update(uint64, int, time.Time) error { panic("store: update") }
func (panicStore) Remove(uint64) error                 { panic("store: remove") }

// A Store panicking in Update or Remove, called on a retry worker, killed
// the process. The panic is recovered and logged as the error would be:
// the call goes on (Update) or ends (Remove) as without a store.
func TestStorePanicsOnWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first two calls fail (the first attempt and the first retry,
		// whose reschedule calls Update), the third succeeds (Remove): by
		// count, not by time, since the retries' jittered delays could put
		// all of them inside any down window.
		var calls atomic.Int32
		dir := cluster.NewStaticDirectory(newProvider("a:1", func(context.Context, call) (any, error) {
			if calls.Add(1) <= 2 {
				return nil, errRefused
			}
			return "ok", nil
		}))
		f := mustNew(t, dir, WithStore(panicStore{newMemStore()}, nil))
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatalf("Invoke = %v", err)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if s := f.Stats(); s.Succeeded != 1 || s.Retried < 2 || s.Queued != 0 || s.InFlight != 0 {
			t.Errorf("%+v; want the call retried and succeeded", s)
		}
		mustClose(t, f)
	})
}
