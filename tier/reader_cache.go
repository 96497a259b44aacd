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
		return
	}
	if e, ok := c.m[k]; ok {
		c.size -= e.Value.(*lruEntry).size
		c.ll.Remove(e)
	}
	c.m[k] = c.ll.PushFront(&lruEntry{key: k, val: v, size: size})
	c.size += size
	for c.size > c.max {
		e := c.ll.Back()
		en := e.Value.(*lruEntry)
		c.ll.Remove(e)
		delete(c.m, en.key)
		c.size -= en.size
	}
}

// call is a GET under way; its waiters block on done.
type call struct {
	done chan struct{}
	val  any
	err  error
}

// fetchFunc performs a GET: the value and the bytes it holds.
type fetchFunc func(ctx context.Context) (any, int64, error)

// lookup returns k's value from cache c, or waits for the GET fetch, shared
// with every concurrent lookup of k (and with a read-ahead of it). The GET
// runs on the Reader's context, not the caller's, so that a caller giving
// up does not fail the others; the caller waits at most until ctx ends.
func (r *Reader) lookup(ctx context.Context, c *lru, k cacheKey, fetch fetchFunc) (any, error) {
	r.mu.Lock()
	if v, ok := c.get(k); ok {
		r.stats.Hits++
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
	r.mu.Unlock()
	select {
	case <-cl.done:
		return cl.val, cl.err
	case <-ctx.Done():
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
		if ahead {
			r.ahead--
		}
		if err == nil {
			c.add(k, v, size)
		}
		r.mu.Unlock()
		close(cl.done)
	}()
	return cl, nil
}

// chunk returns chunk i of the segment's .log: ChunkSize bytes from
// i*ChunkSize, fewer at the end.
func (r *Reader) chunk(ctx context.Context, seg *segRef, i int64) ([]byte, error) {
	v, err := r.lookup(ctx, r.data, cacheKey{seg.id, index.ObjectLog, i}, r.fetchChunk(seg, i))
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
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
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, 0, fmt.Errorf("%w: %s: read %d bytes at %d: %v", ErrCorruptSegment, seg.key, n, at, err)
		}
		return b, n, nil
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
