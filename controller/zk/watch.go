package zk

import (
	"errors"
	"fmt"

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
			e := &cached{exists: true, data: data, stat: st}
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
			e := &cached{}
			c.cache[k] = e
			return e, nil
		}
		// Created in between; its creation fires the watch set above.
	}
	return nil, fmt.Errorf("read %s: changing too fast", path)
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
			c.cache[k] = &cached{exists: true, children: kids, stat: st}
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
			c.cache[k] = &cached{}
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
