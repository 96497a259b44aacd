package broker

// Incremental fetch sessions (KIP-227). A session remembers, per
// partition, the fetch offset and limits the client last sent and the high
// watermark, last stable offset and log start offset it was last told; an
// incremental fetch names only changed partitions, and its response holds
// only partitions with news. The cache holds at most
// max.incremental.fetch.session.cache.slots sessions and evicts the least
// recently used one when full.

import (
	"container/list"
	"math/rand/v2"
	"sync"
)

type sessPart struct {
	key         tp
	topicID     [16]byte
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32 // CurrentLeaderEpoch sent by the client
	// What the client was last told; -1 = nothing yet.
	hw, lso, logStart int64
}

type fetchSession struct {
	id    int32
	mu    sync.Mutex // held for the whole of a fetch using the session
	epoch int32      // the epoch the next request must carry
	order []*sessPart
	parts map[tp]*sessPart
	elem  *list.Element
}

type fetchSessions struct {
	mu   sync.Mutex
	max  int
	byID map[int32]*fetchSession
	lru  *list.List // front = most recently used
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, byID: map[int32]*fetchSession{}, lru: list.New()}
}

// create makes a new session, evicting the least recently used when the
// cache is full. It returns nil when sessions are disabled (max 0).
func (c *fetchSessions) create() *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max <= 0 {
		return nil
	}
	for len(c.byID) >= c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.byID, old.Value.(*fetchSession).id)
	}
	var id int32
	for id == 0 || c.byID[id] != nil {
		id = rand.Int32()
	}
	fs := &fetchSession{id: id, epoch: 1, parts: map[tp]*sessPart{}}
	fs.elem = c.lru.PushFront(fs)
	c.byID[id] = fs
	return fs
}

func (c *fetchSessions) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs := c.byID[id]
	if fs != nil {
		c.lru.MoveToFront(fs.elem)
	}
	return fs
}

func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fs := c.byID[id]; fs != nil {
		c.lru.Remove(fs.elem)
		delete(c.byID, id)
	}
}

func (fs *fetchSession) upsert(sp sessPart) {
	if cur, ok := fs.parts[sp.key]; ok {
		cur.fetchOffset, cur.maxBytes, cur.leaderEpoch, cur.topicID = sp.fetchOffset, sp.maxBytes, sp.leaderEpoch, sp.topicID
		return
	}
	sp.hw, sp.lso, sp.logStart = -1, -1, -1
	p := &sp
	fs.parts[sp.key] = p
	fs.order = append(fs.order, p)
}

func (fs *fetchSession) forget(k tp) {
	if _, ok := fs.parts[k]; !ok {
		return
	}
	delete(fs.parts, k)
	for i, p := range fs.order {
		if p.key == k {
			fs.order = append(fs.order[:i], fs.order[i+1:]...)
			break
		}
	}
}
