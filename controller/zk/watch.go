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

type watchKind uint8

const (
	watchData watchKind = iota
	watchChildren
)

type watchKey struct {
	kind watchKind
	path string // Kafka path, without the chroot
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
		case c.invalid <- k:
		case <-c.done:
		}
	}()
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
