package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// errDamaged is wrapped by the errors about a damaged file: Open's for a
// truncated file or damaged pages, every method's after bbolt panicked, and
// the StoredCall.Err of a record Load cannot decode. The error names the
// file and what is wrong.
var errDamaged = errors.New("boltstore: damaged store file")

// The bbolt file format (version 2), as go.etcd.io/bbolt v1.x writes it:
// fixed-size pages; pages 0 and 1 are meta pages, the others branch, leaf
// or freelist pages. Integers are in the machine's byte order (bbolt maps
// the file into memory and reads them in place).
const (
	pageHeaderSize   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	metaSize         = 64 // magic, version, pageSize, flags uint32; root, sequence, freelist, pgid, txid, checksum uint64
	metaChecksumOff  = 56 // the checksum is FNV-1a 64 of the meta's first 56 bytes
	elementSize      = 16 // branch: pos, ksize uint32, pgid uint64; leaf: flags, pos, ksize, vsize uint32
	bucketHeaderSize = 16 // root pgid uint64, sequence uint64; an inline bucket's page follows

	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketEntry  = 0x01 // leaf element flag

	boltMagic   = 0xED0CDAED
	boltVersion = 2
	noFreelist  = ^uint64(0)

	minPageSize = 1 << 10
	maxPageSize = 1 << 26
)

var ne = binary.NativeEndian

type metaPage struct {
	pageSize                 uint64
	root, freelist, pgid, tx uint64
	err                      error // nil if valid
}

// parseMeta reads the meta of the page starting at b.
func parseMeta(b []byte) metaPage {
	if len(b) < pageHeaderSize+metaSize {
		return metaPage{err: fmt.Errorf("truncated: %d bytes, shorter than a meta page", len(b))}
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	mp := metaPage{
		pageSize: uint64(ne.Uint32(m[8:12])),
		root:     ne.Uint64(m[16:24]),
		freelist: ne.Uint64(m[32:40]),
		pgid:     ne.Uint64(m[40:48]),
		tx:       ne.Uint64(m[48:56]),
	}
	h := fnv.New64a()
	h.Write(m[:metaChecksumOff])
	switch {
	case ne.Uint32(m[0:4]) != boltMagic:
		mp.err = errors.New("not a bbolt meta page (bad magic)")
	case ne.Uint32(m[4:8]) != boltVersion:
		mp.err = fmt.Errorf("bbolt file format version %d, want %d", ne.Uint32(m[4:8]), boltVersion)
	case ne.Uint64(m[metaChecksumOff:metaSize]) != h.Sum64():
		mp.err = errors.New("meta page checksum mismatch")
	}
	return mp
}

// verifier walks a bbolt file with bounds-checked reads (no mmap), so
// that a truncated or damaged file is an error, not a fault: bbolt itself
// trusts the file, and a page beyond the end of a truncated file is a
// SIGBUS, a damaged page an assertion panic on one of its goroutines.
type verifier struct {
	f        *os.File
	size     int64
	pageSize uint64
	hwm      uint64          // pages in use: ids below it
	seen     map[uint64]bool // pages reached (overflow pages included)
	freed    map[uint64]bool // pages in the freelist
	depth    int             // of the page being checked; its buffer is bufs[depth]
	bufs     [][]byte        // one page buffer per depth, reused
}

// buf returns the buffer of the current depth, n bytes long.
func (v *verifier) buf(n uint64) []byte {
	for len(v.bufs) <= v.depth {
		v.bufs = append(v.bufs, nil)
	}
	if uint64(cap(v.bufs[v.depth])) < n {
		v.bufs[v.depth] = make([]byte, n)
	}
	return v.bufs[v.depth][:n]
}

// verifyFile checks that the bbolt file at path is whole and consistent
// enough for bbolt to open it read-write and use it without faulting or
// panicking: valid meta pages (as bbolt chooses them), no page in use
// beyond the end of the file, every page reachable from the root read
// within bounds, of the right type, referenced once, not also free, with
// keys in order. A missing or empty file passes (bbolt creates it).
func verifyFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return nil
	}
	v := &verifier{f: f, size: st.Size(), seen: map[uint64]bool{}, freed: map[uint64]bool{}}
	if err := v.verify(); err != nil {
		return fmt.Errorf("%w: %w", errDamaged, err)
	}
	return nil
}

// needed is pages*pageSize as a decimal string, "more than 2^64" if it
// overflows.
func needed(pages, pageSize uint64) string {
	if pages > ^uint64(0)/pageSize {
		return "more than 2^64"
	}
	return fmt.Sprint(pages * pageSize)
}

func (v *verifier) read(off, n uint64) ([]byte, error) {
	b := make([]byte, n)
	return b, v.readInto(b, off)
}

// readInto fills b from offset off of the file.
func (v *verifier) readInto(b []byte, off uint64) error {
	n := uint64(len(b))
	if n > uint64(v.size) || off > uint64(v.size)-n {
		return fmt.Errorf("truncated: %d bytes at offset %d are beyond the end of the file (%d bytes)", n, off, v.size)
	}
	if k, err := v.f.ReadAt(b, int64(off)); k < len(b) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

func (v *verifier) verify() error {
	// The page size, as bbolt finds it: from the first meta page, or else
	// from a second meta page found at 1 KiB << i.
	head, err := v.read(0, uint64(min(v.size, 4096)))
	if err != nil {
		return err
	}
	m0 := parseMeta(head)
	ps := m0.pageSize
	if m0.err != nil {
		ps = 0
		for i := range 15 {
			pos := int64(1024) << i
			if pos >= v.size-1024 {
				break
			}
			b, err := v.read(uint64(pos), uint64(min(v.size-pos, 4096)))
			if err != nil {
				break
			}
			if m := parseMeta(b); m.err == nil {
				ps = m.pageSize
				break
			}
		}
		if ps == 0 {
			return fmt.Errorf("no valid meta page (first: %v)", m0.err)
		}
	}
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return fmt.Errorf("page size %d out of range", ps)
	}
	v.pageSize = ps
	if uint64(v.size) < 2*ps {
		return fmt.Errorf("truncated: %d bytes, less than the two meta pages (%d bytes)", v.size, 2*ps)
	}
	p0, _ := v.read(0, ps)
	p1, _ := v.read(ps, ps)
	a, b := parseMeta(p0), parseMeta(p1)
	if b.tx > a.tx { // bbolt prefers the meta page with the higher transaction ID
		a, b = b, a
	}
	m := a
	if m.err != nil {
		if m = b; m.err != nil {
			return fmt.Errorf("both meta pages are invalid: %v; %v", a.err, b.err)
		}
	}
	v.hwm = m.pgid
	switch {
	case m.pgid < 3 || m.root < 2 || m.root >= m.pgid:
		return fmt.Errorf("meta page: root page %d of %d pages in use: out of range", m.root, m.pgid)
	case m.pgid > uint64(v.size)/ps:
		return fmt.Errorf("truncated: %d bytes, the %d pages in use need %s bytes", v.size, m.pgid, needed(m.pgid, ps))
	}
	if m.freelist != noFreelist {
		if err := v.freelist(m.freelist); err != nil {
			return err
		}
	}
	if _, _, err := v.page(m.root, nil, nil); err != nil {
		return fmt.Errorf("root bucket: %w", err)
	}
	return nil
}

// load reads the header of page id and checks its range, id and type
// (want, or branch or leaf if 0); it marks its pages seen and returns the
// whole page, overflow pages included.
func (v *verifier) load(id uint64, want uint16) ([]byte, error) {
	if id < 2 || id >= v.hwm {
		return nil, fmt.Errorf("page %d: out of range [2, %d)", id, v.hwm)
	}
	h := v.buf(v.pageSize) // within the file: the pages in use are (verify)
	if err := v.readInto(h, id*v.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := ne.Uint64(h[0:8]); got != id {
		return nil, fmt.Errorf("page %d: header says page %d", id, got)
	}
	flags := ne.Uint16(h[8:10])
	switch {
	case want == 0 && flags != branchPage && flags != leafPage:
		return nil, fmt.Errorf("page %d: type %#x, want a branch or leaf page", id, flags)
	case want != 0 && flags != want:
		return nil, fmt.Errorf("page %d: type %#x, want %#x", id, flags, want)
	}
	overflow := uint64(ne.Uint32(h[12:16]))
	if overflow >= v.hwm-id {
		return nil, fmt.Errorf("page %d: %d overflow pages: beyond the %d pages in use", id, overflow, v.hwm)
	}
	for i := id; i <= id+overflow; i++ {
		if v.seen[i] {
			return nil, fmt.Errorf("page %d: referenced twice", i)
		}
		if v.freed[i] {
			return nil, fmt.Errorf("page %d: in use and free", i)
		}
		v.seen[i] = true
	}
	if overflow == 0 {
		return h, nil
	}
	b := v.buf((overflow + 1) * v.pageSize)
	if err := v.readInto(b, id*v.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return b, nil
}

func (v *verifier) freelist(id uint64) error {
	b, err := v.load(id, freelistPage)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	idx, count := uint64(0), uint64(ne.Uint16(b[10:12]))
	if count == 0xFFFF { // the count is the first element
		if len(b) < pageHeaderSize+8 {
			return fmt.Errorf("freelist page %d: short", id)
		}
		idx, count = 1, ne.Uint64(b[pageHeaderSize:])
	}
	if count > (uint64(len(b))-pageHeaderSize)/8-idx {
		return fmt.Errorf("freelist page %d: %d free pages do not fit in it", id, count)
	}
	for i := range count {
		fid := ne.Uint64(b[pageHeaderSize+(idx+i)*8:])
		if fid < 2 || fid >= v.hwm || v.freed[fid] || v.seen[fid] {
			return fmt.Errorf("freelist page %d: free page %d: out of range, freed twice or in use", id, fid)
		}
		v.freed[fid] = true
	}
	return nil
}

// elements returns the elements of the page in b (a page, or an inline
// bucket's page) after checking that they lie within b, packed one after
// the other behind the element headers as bbolt writes them, with
// non-empty keys. (bbolt reads a key and a value where the element says;
// one that overlaps another, or an empty key, makes its writes panic.)
func elements(b []byte, what string) (flags uint16, elems [][3][]byte, err error) {
	if len(b) < pageHeaderSize {
		return 0, nil, fmt.Errorf("%s: short page", what)
	}
	flags = ne.Uint16(b[8:10])
	count := int(ne.Uint16(b[10:12]))
	if pageHeaderSize+count*elementSize > len(b) {
		return 0, nil, fmt.Errorf("%s: %d elements do not fit in the page", what, count)
	}
	elems = make([][3][]byte, count)
	next := uint64(pageHeaderSize + count*elementSize) // where the next element's data must start
	for i := range count {
		off := pageHeaderSize + i*elementSize
		e := b[off : off+elementSize]
		var pos, ksize, vsize uint64
		if flags == branchPage {
			pos, ksize = uint64(ne.Uint32(e[0:4])), uint64(ne.Uint32(e[4:8]))
		} else {
			pos, ksize, vsize = uint64(ne.Uint32(e[4:8])), uint64(ne.Uint32(e[8:12])), uint64(ne.Uint32(e[12:16]))
		}
		start := uint64(off) + pos
		switch {
		case start+ksize+vsize > uint64(len(b)):
			return 0, nil, fmt.Errorf("%s: element %d lies beyond the page", what, i)
		case start != next:
			return 0, nil, fmt.Errorf("%s: element %d starts at %d, want %d (right after the previous one)", what, i, start, next)
		case ksize == 0:
			return 0, nil, fmt.Errorf("%s: element %d has an empty key", what, i)
		}
		next = start + ksize + vsize
		elems[i] = [3][]byte{e, b[start : start+ksize], b[start+ksize : start+ksize+vsize]}
	}
	return flags, elems, nil
}

// page checks the subtree of page id, whose keys must lie in
// [minKey, maxKey) (nil: unbounded), as bbolt's consistency check does, and
// returns its first and last keys. A branch element's key must be the
// first key of its subtree, as bbolt keeps it (every change to a node
// rewrites its key in the parent): a subtree whose first key differs was
// damaged, and bbolt's writes on it corrupt the tree further.
func (v *verifier) page(id uint64, minKey, maxKey []byte) (first, last []byte, err error) {
	v.depth++ // the buffers of the pages above stay as they are
	defer func() { v.depth-- }()
	b, err := v.load(id, 0)
	if err != nil {
		return nil, nil, err
	}
	what := fmt.Sprintf("page %d", id)
	flags, elems, err := elements(b, what)
	if err != nil {
		return nil, nil, err
	}
	if flags == leafPage {
		last, err := v.leaf(elems, what, minKey, maxKey)
		if err != nil || len(elems) == 0 {
			return nil, nil, err
		}
		return bytes.Clone(elems[0][1]), bytes.Clone(last), nil
	}
	if len(elems) == 0 {
		return nil, nil, fmt.Errorf("%s: empty branch page", what)
	}
	running := minKey
	for i, e := range elems {
		key := e[1]
		if err := keyOrder(what, i, key, running, maxKey); err != nil {
			return nil, nil, err
		}
		next := maxKey
		if i < len(elems)-1 {
			next = elems[i+1][1]
		}
		child := ne.Uint64(e[0][8:16])
		f, l, err := v.page(child, key, next)
		if err != nil {
			return nil, nil, err
		}
		if !bytes.Equal(f, key) {
			return nil, nil, fmt.Errorf("%s: key %d (%x) is not the first key (%x) of its page %d", what, i, key, f, child)
		}
		running, last = l, l
	}
	return bytes.Clone(elems[0][1]), last, nil
}

// leaf checks the elements of a leaf page and the buckets they hold.
func (v *verifier) leaf(elems [][3][]byte, what string, minKey, maxKey []byte) ([]byte, error) {
	running := minKey
	for i, e := range elems {
		key, val := e[1], e[2]
		if err := keyOrder(what, i, key, running, maxKey); err != nil {
			return nil, err
		}
		running = key
		if ne.Uint32(e[0][0:4])&bucketEntry == 0 {
			continue
		}
		if len(val) < bucketHeaderSize {
			return nil, fmt.Errorf("%s: bucket %q: short bucket header", what, key)
		}
		if root := ne.Uint64(val[0:8]); root != 0 {
			if _, _, err := v.page(root, nil, nil); err != nil {
				return nil, fmt.Errorf("bucket %q: %w", key, err)
			}
			continue
		}
		// An inline bucket: its leaf page follows the header.
		inner := fmt.Sprintf("inline bucket %q", key)
		flags, ielems, err := elements(val[bucketHeaderSize:], inner)
		if err != nil {
			return nil, err
		}
		if flags != leafPage {
			return nil, fmt.Errorf("%s: page type %#x, want a leaf page", inner, flags)
		}
		if _, err := v.leaf(ielems, inner, nil, nil); err != nil {
			return nil, err
		}
	}
	if len(elems) == 0 {
		return nil, nil
	}
	return elems[len(elems)-1][1], nil
}

// keyOrder is bbolt's key order rule: key i is at least the previous
// subtree's bound (i == 0) or above the previous key, and below maxKey.
func keyOrder(what string, i int, key, prev, maxKey []byte) error {
	switch {
	case i == 0 && prev != nil && bytes.Compare(prev, key) > 0,
		i > 0 && bytes.Compare(prev, key) >= 0:
		return fmt.Errorf("%s: key %d (%x) out of order after %x", what, i, key, prev)
	case maxKey != nil && bytes.Compare(key, maxKey) >= 0:
		return fmt.Errorf("%s: key %d (%x) not below its parent's next key %x", what, i, key, maxKey)
	}
	return nil
}
