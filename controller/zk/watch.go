package zk

import (
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"
)

// The run goroutine reads ZooKeeper through a cache of znodes it watches:
// an entry is read (and a watch set) once and dropped when its watch fires,
// so a rebuilt snapshot reads only what changed and every znode has at most
// one watch of each kind.
//
// The entries are read at different times, and a watch's firing reaches
// the run goroutine some time after the change, so the cache may hold a
// topic znode read after a reassignment next to a partition state read
// before it: a torn view, the replicas of one moment with the leader and
// ISR of another. The active controller sends the brokers only views that
// ZooKeeper held at one zxid (consistent): ZooKeeper sends a client the
// event of a watch before the answer to any read that sees the change, and
// the client closes the watch's channel as it gets the event, so after one
// more read (a barrier) every entry whose channel is still open held, as
// read, at the barrier's zxid. Entries whose watch fired are dropped and
// read again, until none has.

type watchKind uint8

const (
	watchData watchKind = iota
	watchChildren
)

type watchKey struct {
	kind watchKind
	path string // Kafka path, without the chroot
}

// firing is a watch that fired: the key and the channel of the read that
// set it, so that it drops that entry and not one read since.
type firing struct {
	k  watchKey
	ch <-chan zk.Event
}

type cached struct {
	exists   bool
	data     []byte
	stat     *zk.Stat
	children []string
	// fired is the channel of the watch set when the entry was read; the
	// client closes it when the watch fires.
	fired <-chan zk.Event
}

// get returns a znode's data and stat, exists false when it is missing.
func (c *Controller) get(path string) (*cached, error) {
	k := watchKey{watchData, path}
	if e, ok := c.cache[k]; ok {
		return e, nil
	}
	for range 5 {
		data, st, ch, err := c.conn.GetW(c.p(path))
		if err == nil {
			e := &cached{exists: true, data: data, stat: st, fired: ch}
			c.cache[k] = e
			c.watch(k, ch)
			return e, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		ok, _, ch, err := c.conn.ExistsW(c.p(path))
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", path, err)
		}
		c.watch(k, ch)
		if !ok {
			e := &cached{fired: ch}
			c.cache[k] = e
			return e, nil
		}
		// Created in between; its creation fires the watch set above.
	}
	return nil, fmt.Errorf("read %s: changing too fast", path)
}

// prefetch reads the data znodes of paths that are not cached with
// concurrent requests (go-zookeeper pipelines them on its connection), so
// that a broker taking over as controller reads the cluster in a few
// round trips instead of one per znode. Missing znodes and errors are left
// to get, which reads them one by one.
func (c *Controller) prefetch(paths []string) {
	type result struct {
		k    watchKey
		data []byte
		st   *zk.Stat
		ch   <-chan zk.Event
	}
	var todo []watchKey
	for _, p := range paths {
		if _, ok := c.cache[watchKey{watchData, p}]; !ok {
			todo = append(todo, watchKey{watchData, p})
		}
	}
	if len(todo) < 2 {
		return
	}
	results := make([]*result, len(todo))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, k := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			data, st, ch, err := c.conn.GetW(c.p(k.path))
			if err == nil {
				results[i] = &result{k, data, st, ch}
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r != nil {
			c.cache[r.k] = &cached{exists: true, data: r.data, stat: r.st, fired: r.ch}
			c.watch(r.k, r.ch)
		}
	}
}

// children returns a znode's children; none when it is missing.
func (c *Controller) children(path string) ([]string, error) {
	k := watchKey{watchChildren, path}
	if e, ok := c.cache[k]; ok {
		return e.children, nil
	}
	for range 5 {
		kids, st, ch, err := c.conn.ChildrenW(c.p(path))
		if err == nil {
			c.cache[k] = &cached{exists: true, children: kids, stat: st, fired: ch}
			c.watch(k, ch)
			return kids, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("list %s: %w", path, err)
		}
		ok, _, ch, err := c.conn.ExistsW(c.p(path))
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", path, err)
		}
		c.watch(k, ch)
		if !ok {
			c.cache[k] = &cached{fired: ch}
			return nil, nil
		}
	}
	return nil, fmt.Errorf("list %s: changing too fast", path)
}

// watch forwards the firing of a watch to the run goroutine.
func (c *Controller) watch(k watchKey, ch <-chan zk.Event) {
	go func() {
		select {
		case <-ch:
		case <-c.done:
			return
		}
		select {
		case c.invalid <- firing{k, ch}:
		case <-c.done:
		}
	}()
}

// evict drops the entry a fired watch was set by, if it is still cached.
func (c *Controller) evict(f firing) {
	if e, ok := c.cache[f.k]; ok && e.fired == f.ch {
		delete(c.cache, f.k)
	}
}

// changed reports whether the entry's watch has fired: the entry may no
// longer hold.
func (e *cached) changed() bool {
	select {
	case <-e.fired:
		return true
	default:
		return false
	}
}

// maxConsistentReads bounds the rereads of one consistent view; a cluster
// changing faster is read again after retryBackoff.
const maxConsistentReads = 10

// dropChanged reads a barrier and then drops every entry whose watch has
// fired (see the file comment); it reports whether it dropped any. When it
// dropped none, the cache is what ZooKeeper held at the barrier's zxid.
func (c *Controller) dropChanged() (bool, error) {
	// Any read will do: the session's requests are answered in order.
	if _, _, err := c.conn.Exists(c.p(brokerIDsPath)); err != nil {
		return false, fmt.Errorf("read %s: %w", brokerIDsPath, err)
	}
	dropped := false
	for k, e := range c.cache {
		if e.changed() {
			delete(c.cache, k)
			dropped = true
		}
	}
	return dropped, nil
}

// cacheZxid is the newest change among the cached znodes: the zxid a view
// built from the cache reads ZooKeeper at.
func (c *Controller) cacheZxid() int64 {
	var z int64
	for _, e := range c.cache {
		if e.stat != nil {
			z = max(z, e.stat.Mzxid, e.stat.Pzxid)
		}
	}
	return z
}
