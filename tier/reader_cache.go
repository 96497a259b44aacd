package tier

// The Reader's cache: one LRU by bytes per class of object (.log chunks;
// .index and .timeindex objects, parsed), GETs shared by concurrent
// requests for the same object or chunk, and bounded read-ahead.

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"

	"strata/index"
)

// cacheKey names a cached object: a chunk of a segment's .log (chunk >= 0)
// or a whole index object (chunk -1). Segment ids are fresh for every
// upload, so a key's bytes never change.
type cacheKey struct {
	seg   index.UUID
	kind  index.ObjectKind
	chunk int64
}

// lru is a set of values bounded by the sum of their sizes, evicting the
// least recently used. Guarded by the Reader's mutex.
type lru struct {
	max, size int64
	ll        list.List // of *lruEntry, most recent first
	m         map[cacheKey]*list.Element
	// onEvict, when set, is called (with the Reader's mutex held) for each
	// value that leaves the cache or that add does not keep.
	onEvict func(any)
}

type lruEntry struct {
	key  cacheKey
	val  any
	size int64
}

func newLRU(max int64) *lru { return &lru{max: max, m: map[cacheKey]*list.Element{}} }

func (c *lru) get(k cacheKey) (any, bool) {
	e, ok := c.m[k]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*lruEntry).val, true
}

func (c *lru) has(k cacheKey) bool { _, ok := c.m[k]; return ok }

// add caches v unless it alone exceeds the bound, then evicts down to it.
func (c *lru) add(k cacheKey, v any, size int64) {
	if size > c.max {
		c.evicted(v)
		return
	}
	if e, ok := c.m[k]; ok {
		en := e.Value.(*lruEntry)
		c.size -= en.size
		c.ll.Remove(e)
		// (Only chunks are compared: parsed indexes are not comparable.)
		if old, ok := en.val.(*chunkBuf); !ok || old != v {
			c.evicted(en.val)
		}
	}
	c.m[k] = c.ll.PushFront(&lruEntry{key: k, val: v, size: size})
	c.size += size
	for c.size > c.max {
		e := c.ll.Back()
		en := e.Value.(*lruEntry)
		c.ll.Remove(e)
		delete(c.m, en.key)
		c.size -= en.size
		c.evicted(en.val)
	}
}

func (c *lru) evicted(v any) {
	if c.onEvict != nil {
		c.onEvict(v)
	}
}

// chunkBuf is a cached .log chunk. A read pins the chunks whose bytes it
// returns until it is released (a fetch: until its response is written);
// once a chunk has left the cache and no read pins it, its buffer holds
// the next chunk fetched. A sequential reader's GETs then land in memory
// that is already mapped: on a virtual machine the first touch of fresh
// pages cost the broker more than copying the bytes. With reused buffers,
// huge pages and no copy into the response, the tier bench's cold read
// went from about 250 to 330-460 MB/s on a 2-CPU machine. Until the short
// last chunks of its 8 MB segments were given recycled buffers too, half
// of the bench's GETs still landed in fresh memory (a quarter of the
// broker's CPU time went to zeroing it).
type chunkBuf struct {
	b       []byte
	pins    int  // reads holding b; guarded by the Reader's mutex
	evicted bool // out of the cache, or never in it
}

// pinLocked adds a read's hold on v when it is a chunk.
func pinLocked(v any) {
	if cb, ok := v.(*chunkBuf); ok {
		cb.pins++
	}
}

// unpinLocked drops a read's hold on cb, recycling its buffer when it was
// the last hold on an evicted chunk.
func (r *Reader) unpinLocked(cb *chunkBuf) {
	cb.pins--
	if cb.pins == 0 && cb.evicted {
		r.recycleLocked(cb)
	}
}

// evictLocked is the chunk cache's onEvict.
func (r *Reader) evictLocked(v any) {
	cb := v.(*chunkBuf)
	cb.evicted = true
	if cb.pins == 0 {
		r.recycleLocked(cb)
	}
}

// recycleLocked keeps cb's buffer for a later chunk when it is of the full
// chunk size and the free list has room.
func (r *Reader) recycleLocked(cb *chunkBuf) {
	if int64(cap(cb.b)) == r.cfg.ChunkSize && len(r.free) < r.maxFree {
		r.free = append(r.free, cb.b[:cap(cb.b)])
	}
	cb.b = nil
}

// buffer returns n bytes for a chunk. A chunk of at least half the chunk
// size (every chunk but the short last one of some segments) gets a buffer
// of the full chunk size, recycled when there is one, so that it can be
// recycled in turn; a smaller one gets exactly n bytes. The cache charges
// a chunk its buffer's capacity, so the short chunks in recycled buffers
// still count what they hold.
func (r *Reader) buffer(n int64) []byte {
	size := r.cfg.ChunkSize
	r.mu.Lock()
	if n < size/2 || n > size {
		size = n
	} else if k := len(r.free); k > 0 {
		b := r.free[k-1]
		r.free = r.free[:k-1]
		r.mu.Unlock()
		return b[:n]
	}
	r.stats.BuffersMade++
	r.mu.Unlock()
	return chunkBuffer(size)[:n]
}

// call is a GET under way; its waiters block on done. pins counts the
// chunk reads waiting for it, whose holds the chunk takes when it
// arrives; finished is set, under the Reader's mutex, when it has.
type call struct {
	done     chan struct{}
	val      any
	err      error
	pins     int
	finished bool
}

// fetchFunc performs a GET: the value and the bytes it holds.
type fetchFunc func(ctx context.Context) (any, int64, error)

// lookup returns k's value from cache c, or waits for the GET fetch, shared
// with every concurrent lookup of k (and with a read-ahead of it). The GET
// runs on the Reader's context, not the caller's, so that a caller giving
// up does not fail the others; the caller waits at most until ctx ends.
// A chunk comes pinned: the caller must unpin it.
func (r *Reader) lookup(ctx context.Context, c *lru, k cacheKey, fetch fetchFunc) (any, error) {
	r.mu.Lock()
	if v, ok := c.get(k); ok {
		r.stats.Hits++
		pinLocked(v)
		r.mu.Unlock()
		return v, nil
	}
	r.stats.Misses++
	cl, ok := r.inflight[k]
	if !ok {
		var err error
		if cl, err = r.startLocked(c, k, fetch, false); err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.stats.DemandGets++
	}
	cl.pins++
	r.mu.Unlock()
	select {
	case <-cl.done:
		return cl.val, cl.err
	case <-ctx.Done():
		r.mu.Lock()
		if !cl.finished {
			cl.pins--
		} else if cb, ok := cl.val.(*chunkBuf); ok && cl.err == nil {
			r.unpinLocked(cb)
		}
		r.mu.Unlock()
		return nil, ctx.Err()
	}
}

// startLocked starts the GET of k in a goroutine of its own; its result
// goes into c (errors are not cached). Called with r.mu held.
func (r *Reader) startLocked(c *lru, k cacheKey, fetch fetchFunc, ahead bool) (*call, error) {
	if r.closed {
		return nil, ErrReaderClosed
	}
	cl := &call{done: make(chan struct{})}
	r.inflight[k] = cl
	if ahead {
		r.ahead++
		r.stats.ReadAheadGets++
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.GetTimeout)
		v, size, err := fetch(ctx)
		cancel()
		cl.val, cl.err = v, err
		r.mu.Lock()
		delete(r.inflight, k)
		cl.finished = true
		if ahead {
			r.ahead--
		}
		if err == nil {
			if cb, ok := v.(*chunkBuf); ok {
				cb.pins += cl.pins
			}
			c.add(k, v, size)
		}
		r.mu.Unlock()
		close(cl.done)
	}()
	return cl, nil
}

// chunk returns chunk i of the segment's .log, pinned: ChunkSize bytes
// from i*ChunkSize, fewer at the end.
func (r *Reader) chunk(ctx context.Context, seg *segRef, i int64) (*chunkBuf, error) {
	v, err := r.lookup(ctx, r.data, cacheKey{seg.id, index.ObjectLog, i}, r.fetchChunk(seg, i))
	if err != nil {
		return nil, err
	}
	return v.(*chunkBuf), nil
}

func (r *Reader) fetchChunk(seg *segRef, i int64) fetchFunc {
	return func(ctx context.Context) (any, int64, error) {
		at := i * r.cfg.ChunkSize
		n := min(r.cfg.ChunkSize, seg.size-at)
		body, err := r.cfg.Store.Get(ctx, seg.key, at, n)
		if errors.Is(err, ErrInvalidRange) { // the object is shorter than the manifest says
			return nil, 0, fmt.Errorf("%w: %v", ErrCorruptSegment, err)
		}
		if err != nil {
			return nil, 0, err
		}
		defer body.Close()
		b := r.buffer(n)
		if _, err := io.ReadFull(body, b); err != nil {
			r.mu.Lock()
			r.recycleLocked(&chunkBuf{b: b})
			r.mu.Unlock()
			return nil, 0, fmt.Errorf("%w: %s: read %d bytes at %d: %v", ErrCorruptSegment, seg.key, n, at, err)
		}
		return &chunkBuf{b: b}, int64(cap(b)), nil
	}
}

// readAhead starts GETs of the chunks after a read of the segment's bytes
// [start, end) when the reader looks sequential: the read began where the
// previous read of the segment ended, or it ended in the last quarter of
// a chunk. At most ReadAhead chunks past end, none already cached or
// under way, and no more than ReadAheadInFlight read-aheads at once.
func (r *Reader) readAhead(seg *segRef, start, end int64) (pastEnd bool) {
	if r.cfg.ReadAhead <= 0 || end <= start {
		return false
	}
	cs := r.cfg.ChunkSize
	last := (end - 1) / cs
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.lastEnd[seg.id]
	if len(r.lastEnd) >= maxTrackedSegments && !seen {
		clear(r.lastEnd)
	}
	r.lastEnd[seg.id] = end
	if !(seen && prev == start) && (last+1)*cs-end > cs/4 {
		return false
	}
	r.aheadLocked(seg, last+1, last+int64(r.cfg.ReadAhead))
	return (last+int64(r.cfg.ReadAhead)+1)*cs >= seg.size
}

// Prefetch starts reading the first ReadAhead chunks of m's .log object
// in the background, within the read-ahead bound.
func (r *Reader) Prefetch(m *index.SegmentMetadata) {
	if r.cfg.ReadAhead <= 0 {
		return
	}
	seg := logRef(m)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.aheadLocked(seg, 0, int64(r.cfg.ReadAhead)-1)
}

// aheadLocked starts background GETs of chunks first..last of seg that
// are neither cached nor under way, while the read-ahead bound allows.
func (r *Reader) aheadLocked(seg *segRef, first, last int64) {
	if r.closed {
		return
	}
	for i := first; i <= last && i*r.cfg.ChunkSize < seg.size; i++ {
		k := cacheKey{seg.id, index.ObjectLog, i}
		if r.data.has(k) || r.inflight[k] != nil {
			continue
		}
		if r.ahead >= r.cfg.ReadAheadInFlight {
			return
		}
		if _, err := r.startLocked(r.data, k, r.fetchChunk(seg, i), true); err != nil {
			return
		}
	}
}

// maxTrackedSegments bounds the segments whose last read end the Reader
// remembers for read-ahead.
const maxTrackedSegments = 4096
