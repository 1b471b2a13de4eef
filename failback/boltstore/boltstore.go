package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/internal/closed"
)

// errClosed is returned by the methods of a closed Store; it matches
// rebound.ErrClosed.
var errClosed = closed.New("boltstore: store closed")

var (
	bucketName       = []byte("failback-calls")
	metaBucket       = []byte("failback-meta")
	quarantineBucket = []byte("failback-quarantine") // records set aside by Quarantine
	lastIDKey        = []byte("last-id")             // the highest ID ever assigned
)

// defaultOpenTimeout is how long Open waits for the file lock another
// process holds (stated in WithOpenTimeout's doc).
const defaultOpenTimeout = 10 * time.Second

// Store is a failback.Store in one bbolt file. Every change is durable
// when its method returns (one fsync per commit) and concurrent changes
// share a commit (group commit, see the package doc). It is safe for
// concurrent use. Create it with Open; the zero value is not usable. Close
// it when done.
type Store struct {
	db     *bolt.DB
	path   string
	nextID atomic.Uint64

	mu     sync.Mutex
	cur    *batch // being filled; nil if none
	closed bool

	kick    chan struct{} // buffered(1): a batch is waiting
	done    chan struct{} // closed by Close
	stopped chan struct{} // closed when the committer has exited

	commits, ops, maxBatch, quarantined atomic.Uint64

	broken      atomic.Pointer[error] // set when bbolt panicked in a commit
	commitPanic func()                // tests: called inside every commit
}

// stats counts the Store's commits, for its tests and benchmarks.
type stats struct {
	// Commits counts write transactions (one fsync each, unless NoSync).
	Commits uint64
	// Ops counts the changes committed (Add, Update, Remove).
	Ops uint64
	// MaxBatch is the largest number of changes one commit carried.
	MaxBatch uint64
	// Quarantined counts the records Quarantine moved aside.
	Quarantined uint64
}

func (s *Store) stats() stats {
	return stats{Commits: s.commits.Load(), Ops: s.ops.Load(), MaxBatch: s.maxBatch.Load(), Quarantined: s.quarantined.Load()}
}

type opKind uint8

const (
	opAdd opKind = iota + 1
	opUpdate
	opRemove
)

type op struct {
	kind     opKind
	id       uint64
	val      []byte // opAdd
	attempts uint32 // opUpdate
	due      int64  // opUpdate
}

// batch is the changes one commit writes; its waiters block on done.
type batch struct {
	ops  []op
	done chan struct{}
	err  error
}

// Option configures Open.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	noSync      bool
	openTimeout time.Duration
	errs        []error
}

// withNoSync skips the fsync of every commit: a crash of the process
// loses nothing, but a crash of the machine may lose the last commits. For
// tests and benchmarks of everything but the disk.
func withNoSync() Option { return optionFunc(func(o *options) { o.noSync = true }) }

// WithOpenTimeout sets how long Open waits for another process's file
// lock. Default: 10 s; d must be positive.
func WithOpenTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "boltstore.WithOpenTimeout", Arg: "d",
				Reason: fmt.Sprintf("%v: must be positive", d)})
			return
		}
		o.openTimeout = d
	})
}

// Open opens (or creates) the store file at path and starts a goroutine
// that Close stops. A truncated or damaged file is an error naming it. An
// empty path or a bad option is a *rebound.ArgumentError.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{openTimeout: defaultOpenTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if path == "" {
		o.errs = append(o.errs, &rebound.ArgumentError{Func: "boltstore.Open", Arg: "path", Reason: "must not be empty"})
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	if err := check(path, o.openTimeout); err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        o.openTimeout,
		NoSync:         o.noSync,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path, kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketName)
		if err != nil {
			return err
		}
		if k, _ := b.Cursor().Last(); len(k) == 8 {
			s.nextID.Store(binary.BigEndian.Uint64(k))
		}
		m, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if v := m.Get(lastIDKey); len(v) == 8 {
			s.nextID.Store(max(s.nextID.Load(), binary.BigEndian.Uint64(v)))
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	go s.commit()
	return s, nil
}

// check verifies an existing, non-empty file at path (verifyFile) while
// holding bbolt's shared lock, so that no writer changes it meanwhile.
func check(path string, timeout time.Duration) error {
	st, err := os.Stat(path)
	switch {
	case err != nil || st.Size() == 0:
		return nil // bbolt creates it, or reports why it cannot
	case st.IsDir():
		return errors.New("is a directory")
	}
	ro, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return err
		}
		// bbolt refused the file; say what is wrong with it if we can.
		if verr := verifyFile(path); verr != nil {
			return verr
		}
		return err
	}
	defer ro.Close()
	return verifyFile(path)
}

// Add implements failback.Store: the call is durable when Add returns nil.
func (s *Store) Add(c failback.StoredCall) (uint64, error) {
	id := s.nextID.Add(1)
	return id, s.submit(op{kind: opAdd, id: id, val: encode(c)})
}

// Update implements failback.Store; updating an unknown ID does nothing.
func (s *Store) Update(id uint64, attempts int, due time.Time) error {
	return s.submit(op{kind: opUpdate, id: id, attempts: uint32(min(uint64(max(attempts, 0)), 1<<32-1)), due: due.UnixNano()})
}

// Remove implements failback.Store.
func (s *Store) Remove(id uint64) error { return s.submit(op{kind: opRemove, id: id}) }

// submit adds o to the batch being filled and waits for its commit.
func (s *Store) submit(o op) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	b := s.cur
	if b == nil {
		b = &batch{done: make(chan struct{})}
		s.cur = b
	}
	b.ops = append(b.ops, o)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // the committer is already due to look
	}
	<-b.done
	return b.err
}

// commit is the committer goroutine: it writes the batch being filled in
// one transaction, as soon as the previous commit is done. While a commit
// (and its fsync) runs, new changes gather in the next batch: the more
// callers wait, the more each commit carries, with no added delay.
func (s *Store) commit() {
	defer close(s.stopped)
	for {
		select {
		case <-s.kick:
		case <-s.done:
			// Close set closed under mu: no batch can be added any more;
			// write the last one.
			s.mu.Lock()
			b := s.cur
			s.cur = nil
			s.mu.Unlock()
			if b != nil {
				s.write(b)
			}
			return
		}
		s.mu.Lock()
		b := s.cur
		s.cur = nil
		s.mu.Unlock()
		if b != nil {
			s.write(b)
		}
	}
}

// broken is the error of a commit during which bbolt panicked; nil if none.
func (s *Store) brokenErr() error {
	if e := s.broken.Load(); e != nil {
		return *e
	}
	return nil
}

// update runs fn in a bbolt read-write transaction on the calling
// goroutine. A panic of bbolt (damage the check at Open could not see)
// is recovered: it breaks the Store, whose every later call returns the
// same error wrapping errDamaged, instead of killing the process.
func (s *Store) update(fn func(*bolt.Tx) error) (err error) {
	if err := s.brokenErr(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: bbolt panicked in a commit (the store is unusable until the process restarts; check the file): %v", errDamaged, s.path, r)
			s.broken.CompareAndSwap(nil, &err)
		}
	}()
	return s.db.Update(fn)
}

func (s *Store) write(b *batch) {
	b.err = s.update(func(tx *bolt.Tx) error {
		if s.commitPanic != nil {
			s.commitPanic()
		}
		bk := tx.Bucket(bucketName)
		var key [8]byte
		var lastAdd uint64
		for i := range b.ops {
			o := &b.ops[i]
			binary.BigEndian.PutUint64(key[:], o.id)
			switch o.kind {
			case opAdd:
				if err := bk.Put(key[:], o.val); err != nil {
					return err
				}
				lastAdd = max(lastAdd, o.id)
			case opUpdate:
				v := bk.Get(key[:])
				if len(v) < headerLen {
					continue // removed (or never added): nothing to update
				}
				nv := make([]byte, len(v))
				copy(nv, v)
				binary.BigEndian.PutUint32(nv[1:5], o.attempts)
				binary.BigEndian.PutUint64(nv[5:13], uint64(o.due))
				if err := bk.Put(key[:], nv); err != nil {
					return err
				}
			case opRemove:
				if err := bk.Delete(key[:]); err != nil {
					return err
				}
			}
		}
		if lastAdd == 0 {
			return nil
		}
		binary.BigEndian.PutUint64(key[:], lastAdd)
		return tx.Bucket(metaBucket).Put(lastIDKey, key[:])
	})
	if b.err != nil && !errors.Is(b.err, errDamaged) {
		b.err = fmt.Errorf("boltstore: commit of %d changes: %w", len(b.ops), b.err)
	}
	s.commits.Add(1)
	s.ops.Add(uint64(len(b.ops)))
	for n := uint64(len(b.ops)); ; {
		m := s.maxBatch.Load()
		if n <= m || s.maxBatch.CompareAndSwap(m, n) {
			break
		}
	}
	close(b.done)
}

// Load implements failback.Store in one read transaction: fn must not call
// the Store. A record Load cannot decode has only ID and Err set (ID 0 for
// a key that is not an 8-byte ID); Err names the file, bucket and key.
func (s *Store) Load(fn func(failback.StoredCall) error) error {
	if s.isClosed() {
		return errClosed
	}
	if err := s.brokenErr(); err != nil {
		return err
	}
	return s.closedErr(s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketName).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var call failback.StoredCall
			if len(k) != 8 {
				call.Err = fmt.Errorf("%w: %s: bucket %q key %x: the key is not an 8-byte call ID", errDamaged, s.path, bucketName, k)
			} else if call, call.Err = decode(v); call.Err != nil {
				call = failback.StoredCall{ID: binary.BigEndian.Uint64(k),
					Err: fmt.Errorf("%w: %s: bucket %q key %x: %w", errDamaged, s.path, bucketName, k, call.Err)}
			} else {
				call.ID = binary.BigEndian.Uint64(k)
			}
			if err := fn(call); err != nil {
				return err
			}
		}
		return nil
	}))
}

// Quarantine implements failback.Store: it moves record id, bytes
// unchanged, to the bucket "failback-quarantine" of the file. id 0 moves
// every record whose key is not an 8-byte ID; an unknown id is no error.
func (s *Store) Quarantine(id uint64, reason error) error {
	if s.isClosed() {
		return errClosed
	}
	var moved uint64
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketName)
		q, err := tx.CreateBucketIfNotExists(quarantineBucket)
		if err != nil {
			return err
		}
		var keys [][]byte
		if id == 0 {
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if len(k) != 8 {
					keys = append(keys, append([]byte(nil), k...))
				}
			}
		} else {
			keys = [][]byte{binary.BigEndian.AppendUint64(nil, id)}
		}
		for _, k := range keys {
			v := b.Get(k)
			if v == nil {
				continue
			}
			if err := q.Put(k, append([]byte(nil), v...)); err != nil {
				return err
			}
			if err := b.Delete(k); err != nil {
				return err
			}
			moved++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("boltstore: quarantine of call %d in %s: %w", id, s.path, s.closedErr(err))
	}
	s.quarantined.Add(moved)
	return nil
}

// count returns the number of stored calls (quarantined records excluded).
func (s *Store) count() (int, error) {
	if s.isClosed() {
		return 0, errClosed
	}
	if err := s.brokenErr(); err != nil {
		return 0, err
	}
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketName).Stats().KeyN
		return nil
	})
	return n, s.closedErr(err)
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// closedErr turns bbolt's "database not open", which a call racing Close
// can meet, into errClosed.
func (s *Store) closedErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return errClosed
	}
	return err
}

// Close writes the changes still waiting and closes the file. It is
// idempotent; later calls of the other methods match rebound.ErrClosed.
// After bbolt panicked in a commit, Close returns that error.
func (s *Store) Close() error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	s.mu.Unlock()
	if !first {
		<-s.stopped
		return s.brokenErr() // a broken Store says so every time
	}
	close(s.done)
	<-s.stopped
	if err := s.brokenErr(); err != nil {
		// bbolt may still hold its write lock from the panicked commit,
		// and its Close would wait for it for ever: leave the file to the
		// process's exit.
		return err
	}
	return s.db.Close()
}

// Record layout (version 1), big endian:
//
//	[0]      version (1)
//	[1:5]    attempts
//	[5:13]   due, Unix nanoseconds
//	[13:21]  born, Unix nanoseconds
//	then     uvarint len + method, uvarint count + (uvarint len + key,
//	         uvarint len + value) per attachment, the encoded arguments to
//	         the end.
const (
	version   = 1
	headerLen = 21
)

func encode(c failback.StoredCall) []byte {
	n := headerLen + binary.MaxVarintLen64*(2+2*len(c.Attachments)) + len(c.Method) + len(c.Args)
	for k, v := range c.Attachments {
		n += len(k) + len(v)
	}
	b := make([]byte, headerLen, n)
	b[0] = version
	binary.BigEndian.PutUint32(b[1:5], uint32(min(uint64(max(c.Attempts, 0)), 1<<32-1)))
	binary.BigEndian.PutUint64(b[5:13], uint64(c.Due.UnixNano()))
	binary.BigEndian.PutUint64(b[13:21], uint64(c.Born.UnixNano()))
	b = appendString(b, c.Method)
	b = binary.AppendUvarint(b, uint64(len(c.Attachments)))
	for k, v := range c.Attachments {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return append(b, c.Args...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errShort = errors.New("truncated")

func decode(v []byte) (failback.StoredCall, error) {
	var c failback.StoredCall
	if len(v) < headerLen {
		return c, errShort
	}
	if v[0] != version {
		return c, fmt.Errorf("unknown version %d", v[0])
	}
	c.Attempts = int(binary.BigEndian.Uint32(v[1:5]))
	c.Due = time.Unix(0, int64(binary.BigEndian.Uint64(v[5:13])))
	c.Born = time.Unix(0, int64(binary.BigEndian.Uint64(v[13:21])))
	rest := v[headerLen:]
	var ok bool
	if c.Method, rest, ok = readString(rest); !ok {
		return c, errShort
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return c, errShort
	}
	rest = rest[k:]
	if n > 0 {
		c.Attachments = make(map[string]string, n)
		for range n {
			var key, val string
			if key, rest, ok = readString(rest); !ok {
				return c, errShort
			}
			if val, rest, ok = readString(rest); !ok {
				return c, errShort
			}
			c.Attachments[key] = val
		}
	}
	c.Args = append([]byte(nil), rest...) // v is only valid in the transaction
	return c, nil
}

func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}
