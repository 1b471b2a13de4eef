package failback

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/admit"
)

// Store keeps the calls an Invoker has queued on durable storage (WithStore).
// Its changes must be durable when they return; New calls Load once. It must
// be safe for concurrent use; failback/boltstore implements it.
type Store interface {
	Add(c StoredCall) (id uint64, err error)             // stores c; its ID is never 0
	Update(id uint64, attempts int, due time.Time) error // records a failed retry
	Remove(id uint64) error                              // forgets id; an unknown id is no error
	Load(fn func(StoredCall) error) error                // calls fn in ID order, until fn fails
	Quarantine(id uint64, reason error) error            // moves record id out of Load's sight, bytes kept
}

// StoredCall is a queued call as a Store keeps it. Due and Born (the first
// failure) are wall-clock times. Load sets only ID and Err for a record it
// cannot decode; Err names the record and says why.
type StoredCall struct {
	ID          uint64            // assigned by Add (0 in the call to Add)
	Method      string            // the Invocation's
	Attachments map[string]string // the Invocation's, with its IdempotencyKey
	Args        []byte            // the arguments, encoded by the Codec
	Attempts    int               // attempts made, the first one included
	Due, Born   time.Time
	Err         error
}

// ErrBadRecord is matched by New's error for a stored call it cannot load,
// and by the reason given to Store.Quarantine. The error names the record.
var ErrBadRecord = errors.New("failback: stored call cannot be loaded")

// badRecordError is a stored call that cannot be loaded: the Store could
// not decode its record (StoredCall.Err), or the Codec its arguments.
type badRecordError struct {
	// ID is the record's ID in the Store (0 if it has none).
	ID uint64
	// Method is the call's method, "" if the record could not be decoded.
	Method string
	// Err says why, and where the record is when the Store says so (for
	// boltstore: the file, bucket and key).
	Err error
}

func (e *badRecordError) Error() string {
	if e.Method == "" {
		return fmt.Sprintf("failback: stored call %d cannot be loaded: %v", e.ID, e.Err)
	}
	return fmt.Sprintf("failback: stored call %d (method %q) cannot be loaded: %v", e.ID, e.Method, e.Err)
}

// Unwrap returns ErrBadRecord and Err.
func (e *badRecordError) Unwrap() []error { return []error{ErrBadRecord, e.Err} }

// IdempotencyKey is the attachment that carries a stored call's key, the
// same on every attempt and across restarts. A caller's key is kept.
const IdempotencyKey = "idempotency-key"

// newIdempotencyKey returns a new random key of 32 hex digits (128 bits).
// Keys are unique, not secret.
func newIdempotencyKey() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], rand.Uint64())
	binary.BigEndian.PutUint64(b[8:], rand.Uint64())
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// Codec encodes the arguments of an Invocation for a Store, and decodes them
// after a restart. It must be safe for concurrent use. JSONCodec is the
// default; failback/protocodec stores protocol buffers messages.
type Codec interface {
	// Marshal encodes the arguments of a call to method.
	Marshal(method string, args []any) ([]byte, error)
	// Unmarshal decodes what Marshal returned for a call to method.
	Unmarshal(method string, data []byte) ([]any, error)
}

// JSONCodec returns the default Codec: arguments as a JSON array. types, if
// not nil, returns one pointer per argument of method, such as
// []any{new(Order)}; each argument is decoded into its pointer's value.
// Without types, or for a result of the wrong length, values are generic.
// It refuses a protocol buffers message other than an anypb.Any.
func JSONCodec(types func(method string) []any) Codec { return jsonCodec{types: types} }

// jsonCodec is JSONCodec's Codec.
type jsonCodec struct{ types func(method string) []any }

// Marshal implements Codec. It refuses a protocol buffers message other
// than an anypb.Any, which JSON could not give back: use failback/protocodec.
func (c jsonCodec) Marshal(method string, args []any) ([]byte, error) {
	if args == nil {
		args = []any{}
	}
	for i, a := range args {
		if isProtoMessage(a) {
			return nil, fmt.Errorf("failback: JSONCodec: argument %d of %q is a protocol buffers message (%T), which JSON cannot give back after a restart: use failback.WithStore(s, protocodec.New(nil))", i, method, a)
		}
	}
	return json.Marshal(args)
}

// isProtoMessage reports whether v is a protocol buffers message (it has
// the ProtoReflect method every generated message has), without importing
// the protobuf runtime into this package.
func isProtoMessage(v any) bool {
	if v == nil {
		return false
	}
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer {
		t = reflect.PointerTo(t) // a message passed by value: its methods are on the pointer
	}
	if _, ok := t.MethodByName("ProtoReflect"); !ok {
		return false
	}
	if t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "google.golang.org/protobuf/types/known/anypb" && t.Elem().Name() == "Any" {
		return false // its JSON form keeps its content: see Marshal
	}
	return true
}

// Unmarshal implements Codec.
func (c jsonCodec) Unmarshal(method string, data []byte) ([]any, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("failback: JSONCodec: arguments of %q: %w", method, err)
	}
	var ptrs []any
	if c.types != nil {
		if ptrs = c.types(method); len(ptrs) != len(raw) {
			ptrs = nil
		}
	}
	args := make([]any, len(raw))
	for i, r := range raw {
		if ptrs == nil {
			if err := json.Unmarshal(r, &args[i]); err != nil {
				return nil, fmt.Errorf("failback: JSONCodec: argument %d of %q: %w", i, method, err)
			}
			continue
		}
		if err := json.Unmarshal(r, ptrs[i]); err != nil {
			return nil, fmt.Errorf("failback: JSONCodec: argument %d of %q: %w", i, method, err)
		}
		args[i] = deref(ptrs[i])
	}
	return args, nil
}

// deref returns *p for a non-nil pointer p, and p itself otherwise.
func deref(p any) any {
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && !v.IsNil() {
		return v.Elem().Interface()
	}
	return p
}

// ErrStore is wrapped by Invoke's error when the Store failed to add a
// call, and by New's when loading failed.
var ErrStore = errors.New("failback: store failed")

// errReloaded is the last error of a call loaded from a Store, until its
// first attempt in this process.
var errReloaded = errors.New("failback: call queued by a previous invoker (loaded from the store)")

// storeConfig is what WithStore sets.
type storeConfig struct {
	store      Store
	codec      Codec
	quarantine bool // WithQuarantine
}

// WithStore keeps the queued calls in s, so they survive a restart: New
// loads them, and calls dropped by Close stay in s. Delivery is at least
// once (see IdempotencyKey). codec encodes the stored arguments; nil means
// JSONCodec(nil). A nil s means no store.
func WithStore(s Store, codec Codec) Option {
	return optionFunc(func(c *config) { c.durable.store, c.durable.codec = s, codec })
}

// WithQuarantine makes New set aside (Store.Quarantine) the stored calls it
// cannot load, counted in Stats.Quarantined. Without it, New fails on such a
// call, naming it.
func WithQuarantine() Option {
	return optionFunc(func(c *config) { c.durable.quarantine = true })
}

func (c storeConfig) codecOrDefault() Codec {
	if c.codec == nil {
		return jsonCodec{}
	}
	return c.codec
}

// withIdempotencyKey returns inv if it already carries a non-empty
// IdempotencyKey, else a copy of it with a new key.
func withIdempotencyKey(inv *cluster.Invocation) *cluster.Invocation {
	if k := inv.Attachments[IdempotencyKey]; k != "" {
		return inv
	}
	c := *inv
	c.Attachments = make(map[string]string, len(inv.Attachments)+1)
	maps.Copy(c.Attachments, inv.Attachments)
	c.Attachments[IdempotencyKey] = newIdempotencyKey()
	return &c
}

// storeAdd puts t in the store (durably) and records its ID in t.
func (f *Invoker) storeAdd(t *task) error {
	st := f.cfg.durable.store
	args, err := marshalArgs(f.cfg.durable.codecOrDefault(), t.inv.Method, t.inv.Args)
	if err != nil {
		return fmt.Errorf("%w: encoding the arguments of %q: %w", ErrStore, t.inv.Method, err)
	}
	id, err := storeAddCall(st, StoredCall{
		Method: t.inv.Method, Attachments: t.inv.Attachments, Args: args,
		Attempts: int(t.attempts), Due: f.at(t.due), Born: f.at(t.born),
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	t.sid = id
	return nil
}

// recovered returns the panic value r recovered from op as an error
// wrapping errPanicked and the *cluster.PanicError.
func recovered(op string, r any) error {
	return fmt.Errorf("%w: %w", errPanicked, &cluster.PanicError{Op: op, Value: r, Stack: debug.Stack()})
}

// marshalArgs is codec.Marshal with a panic returned as an error: the
// Codec is the user's, and Invoke must release the call it reserved.
func marshalArgs(codec Codec, method string, args []any) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, recovered("failback.Codec.Marshal", r)
		}
	}()
	return codec.Marshal(method, args)
}

// unmarshalArgs is codec.Unmarshal with a panic returned as an error: a
// record the Codec cannot read is a bad record, not a crash of New.
func unmarshalArgs(codec Codec, method string, data []byte) (args []any, err error) {
	defer func() {
		if r := recover(); r != nil {
			args, err = nil, recovered("failback.Codec.Unmarshal", r)
		}
	}()
	return codec.Unmarshal(method, data)
}

// storeAddCall is st.Add with a panic returned as an error.
func storeAddCall(st Store, c StoredCall) (id uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			id, err = 0, recovered("failback.Store.Add", r)
		}
	}()
	return st.Add(c)
}

// loadStored queues every call of the store; New calls it before starting
// the goroutines.
func (f *Invoker) loadStored() error {
	st := f.cfg.durable.store
	if st == nil {
		return nil
	}
	if _, ok := st.(Claimer); ok {
		return nil // shared: claimed in batches instead (claimLoop)
	}
	codec := f.cfg.durable.codecOrDefault()
	now, wallNow := f.now(), time.Now()
	pn := admit.Normalized(f.cfg.policy).(rebound.Policy)
	maxWait := max(pn.Max, pn.MaxRetryAfter) // the longest wait the policy can ask for
	var (
		loaded  []*task
		bad     []*badRecordError
		clamped int
	)
	err := st.Load(func(c StoredCall) error {
		t, berr, clamp := f.storedTask(codec, c, now, wallNow, maxWait)
		if berr != nil {
			if !f.cfg.durable.quarantine {
				return berr
			}
			bad = append(bad, berr)
			return nil
		}
		if clamp {
			clamped++
		}
		loaded = append(loaded, t)
		return nil
	})
	if err != nil {
		if _, ok := errors.AsType[*badRecordError](err); ok {
			return fmt.Errorf("%w: loading the stored calls (failback.WithQuarantine sets such calls aside): %w", ErrStore, err)
		}
		return fmt.Errorf("%w: loading the stored calls: %w", ErrStore, err)
	}
	// Quarantine after Load: the Store may not take a change while it
	// runs Load's fn.
	for _, b := range bad {
		if err := st.Quarantine(b.ID, b); err != nil {
			return fmt.Errorf("%w: quarantining a stored call: %w: %w", ErrStore, b, err)
		}
		f.log.Error("failback: stored call set aside: it cannot be loaded (quarantined in the store)",
			zap.Uint64("id", b.ID), zap.String("method", b.Method), zap.Error(b.Err))
	}
	if clamped > 0 {
		f.log.Warn("failback: stored times after now clamped (the clock of the process that stored them was ahead)",
			zap.Int("calls", clamped), zap.Duration("max_wait", maxWait))
	}
	f.mu.Lock()
	f.quarantined += uint64(len(bad))
	for _, t := range loaded {
		f.offered++
		f.pushLocked(t)
	}
	f.mu.Unlock()
	if len(loaded) > 0 {
		f.log.Info("failback: loaded stored calls", zap.Int("calls", len(loaded)))
	}
	return nil
}

// storedTask turns c, a call loaded or claimed from the Store, into a
// task; bad says why it cannot, clamped whether its stored times were
// after now (see loadStored).
func (f *Invoker) storedTask(codec Codec, c StoredCall, now int64, wallNow time.Time, maxWait time.Duration) (t *task, bad *badRecordError, clamped bool) {
	if c.Err != nil {
		return nil, &badRecordError{ID: c.ID, Err: c.Err}, false
	}
	args, err := unmarshalArgs(codec, c.Method, c.Args)
	if err != nil {
		return nil, &badRecordError{ID: c.ID, Method: c.Method, Err: err}, false
	}
	t = &task{
		inv:      &cluster.Invocation{Method: c.Method, Args: args, Attachments: c.Attachments},
		attempts: int32(min(c.Attempts, 1<<31-1)),
		lastErr:  errReloaded,
		sid:      c.ID,
		expires:  math.MaxInt64,
	}
	// Wall-clock times back on the monotonic clock. A clock that was
	// ahead when they were stored must not stretch waits or TTLs: the
	// first failure is no later than now, the due time no later than
	// the policy's longest wait from now; a due time in the past makes
	// the call due now.
	born, dueIn := c.Born, c.Due.Sub(wallNow)
	if born.After(wallNow) {
		born = wallNow
		clamped = true
	} else if dueIn > maxWait {
		clamped = true
	}
	t.born = now - int64(wallNow.Sub(born))
	t.due = max(now+int64(min(dueIn, maxWait)), now)
	if f.cfg.ttl > 0 {
		t.expires = satAdd(t.born, f.cfg.ttl)
	}
	// MaxElapsed counts from the first failure; the delays drawn before
	// the restart are skipped, MaxAttempts counts the attempts made.
	t.sched = f.retrier.NewSchedule(f.at(t.born))
	t.sched.Resume(int(t.attempts))
	t.seq = f.nextSeq.Add(1) - 1
	return t, nil, clamped
}
