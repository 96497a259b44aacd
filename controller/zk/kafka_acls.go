package zk

// The authorizer's ACLs, where Kafka's ZooKeeper mode keeps them
// (ZkAclStore), with Kafka's JSON, so that Kafka's tools and brokers
// read the same:
//
//	/kafka-acl/<ResourceType>/<name>                     LITERAL patterns
//	/kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns
//	    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
//	/kafka-acl-changes/acl_changes_<n>           "<ResourceType>:<name>", after a LITERAL change
//	/kafka-acl-extended-changes/acl_changes_<n>  {"version":1,"resourceType":…,"name":…,"patternType":"PREFIXED"}
//
// A broker changes a resource's znode with a conditional write (its
// version), then adds a change notification; every broker watches both
// change paths and reads the ACLs again when one appears, so a change
// made on one broker applies on all within a ZooKeeper round trip. The
// ACL znodes are readable by everyone and changed by the brokers'
// identity only when zookeeper.set.acl is on (Kafka's secure root paths,
// acl.go). Notifications older than 15 minutes are deleted, as Kafka's
// ZkNodeChangeNotificationListener does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

const (
	kafkaACLPath           = "/kafka-acl"
	kafkaACLChangesPath    = "/kafka-acl-changes"
	kafkaACLExtendedPath   = "/kafka-acl-extended"
	kafkaACLPrefixedPath   = kafkaACLExtendedPath + "/prefixed"
	kafkaACLExtChangesPath = "/kafka-acl-extended-changes"
	aclChangePrefix        = "/acl_changes_"
	// aclChangeExpiry is how long change notifications are kept (Kafka's
	// ZkNodeChangeNotificationListener: 15 minutes).
	aclChangeExpiry = 15 * time.Minute
	// aclPoll reads the ACLs again even without a notification, in case
	// a watch was lost with the session.
	aclPoll = 30 * time.Second
)

// aclZNode is a resource's znode.
type aclZNode struct {
	Version int                   `json:"version"`
	ACLs    []controller.ACLEntry `json:"acls"`
}

type aclExtendedChange struct {
	Version      int    `json:"version"`
	ResourceType string `json:"resourceType"`
	Name         string `json:"name"`
	PatternType  string `json:"patternType"`
}

func aclResourcePath(r controller.ACLResource) (string, error) {
	if r.Name == "" || strings.Contains(r.Name, "/") || r.Name == "." || r.Name == ".." {
		return "", fmt.Errorf("resource name %q cannot be a znode name", r.Name)
	}
	switch r.Pattern {
	case "LITERAL":
		return kafkaACLPath + "/" + r.Type + "/" + r.Name, nil
	case "PREFIXED":
		return kafkaACLPrefixedPath + "/" + r.Type + "/" + r.Name, nil
	}
	return "", fmt.Errorf("pattern type %q", r.Pattern)
}

// startACLs creates the ACL paths and starts watching them, once.
func (c *Controller) startACLs() {
	c.aclOnce.Do(func() {
		err := c.ensureACLPaths()
		if err == nil {
			err = c.loadACLs()
		}
		if err != nil {
			c.log.Warn("read ACLs", "err", err)
		}
		c.wg.Add(1)
		go c.watchACLs()
	})
}

// ACLs returns the ACLs read from ZooKeeper (controller.ACLStore).
func (c *Controller) ACLs() map[controller.ACLResource][]controller.ACLEntry {
	c.startACLs()
	m, _ := c.aclStore.Get()
	return m
}

// ACLChanges returns a channel closed when the ACLs change.
func (c *Controller) ACLChanges() <-chan struct{} {
	c.startACLs()
	_, ch := c.aclStore.Get()
	return ch
}

// watchACLs reads the ACLs again whenever a change notification appears
// (or every aclPoll), until Close.
func (c *Controller) watchACLs() {
	defer c.wg.Done()
	lastPurge := time.Time{}
	for {
		var chs []<-chan zk.Event
		var err error
		for _, p := range []string{kafkaACLChangesPath, kafkaACLExtChangesPath} {
			var ch <-chan zk.Event
			if _, _, ch, err = c.conn.ChildrenW(c.p(p)); err != nil {
				break
			}
			chs = append(chs, ch)
		}
		if err == nil {
			err = c.loadACLs()
		}
		if err == nil && time.Since(lastPurge) > time.Minute {
			c.purgeACLChanges()
			lastPurge = time.Now()
		}
		wait := aclPoll
		if err != nil {
			c.log.Warn("watch ACLs", "err", err)
			wait = time.Second
			if errors.Is(err, zk.ErrNoNode) {
				c.ensureACLPaths() // ZooKeeper lost them: again
			}
		}
		timer := time.NewTimer(wait)
		var ch1, ch2 <-chan zk.Event
		if len(chs) == 2 {
			ch1, ch2 = chs[0], chs[1]
		}
		select {
		case <-ch1:
		case <-ch2:
		case <-timer.C:
		case <-c.done:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// ensureACLPaths creates Kafka's ACL paths.
func (c *Controller) ensureACLPaths() error {
	for _, p := range []string{kafkaACLPath, kafkaACLChangesPath, kafkaACLExtendedPath, kafkaACLPrefixedPath, kafkaACLExtChangesPath} {
		if err := c.createIfMissing(c.p(p)); err != nil {
			return err
		}
	}
	return nil
}

// loadACLs reads every resource's ACLs and publishes them.
func (c *Controller) loadACLs() error {
	all, err := c.readACLs()
	if err != nil {
		return err
	}
	cur, _ := c.aclStore.Get()
	if !sameACLMaps(cur, all) {
		c.aclStore.Set(all)
	}
	return nil
}

// ReadACLs reads every resource's ACLs from ZooKeeper now, not from what
// the watch last published: after this controller has seen a change,
// what it reads is at least as new (the bucket's metadata snapshot, right
// after a restore wrote ACLs and then the cluster id).
func (c *Controller) ReadACLs() (map[controller.ACLResource][]controller.ACLEntry, error) {
	c.startACLs()
	return c.readACLs()
}

// readACLs reads every resource's ACLs.
func (c *Controller) readACLs() (map[controller.ACLResource][]controller.ACLEntry, error) {
	all := map[controller.ACLResource][]controller.ACLEntry{}
	for _, root := range []struct{ path, pattern string }{{kafkaACLPath, "LITERAL"}, {kafkaACLPrefixedPath, "PREFIXED"}} {
		types, _, err := c.conn.Children(c.p(root.path))
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", root.path, err)
		}
		for _, typ := range types {
			names, _, err := c.conn.Children(c.p(root.path + "/" + typ))
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list %s/%s: %w", root.path, typ, err)
			}
			for _, name := range names {
				path := root.path + "/" + typ + "/" + name
				data, _, err := c.conn.Get(c.p(path))
				if errors.Is(err, zk.ErrNoNode) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("read %s: %w", path, err)
				}
				var z aclZNode
				if err := json.Unmarshal(data, &z); err != nil {
					c.log.Warn("unreadable ACL znode", "path", path, "err", err)
					continue
				}
				if len(z.ACLs) > 0 {
					all[controller.ACLResource{Type: typ, Pattern: root.pattern, Name: name}] = z.ACLs
				}
			}
		}
	}
	return all, nil
}

func sameACLMaps(a, b map[controller.ACLResource][]controller.ACLEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

// UpdateACLs changes res's znode with a conditional write and announces
// the change to every broker (controller.ACLStore).
func (c *Controller) UpdateACLs(ctx context.Context, res controller.ACLResource, edit func([]controller.ACLEntry) []controller.ACLEntry) error {
	c.startACLs()
	path, err := aclResourcePath(res)
	if err != nil {
		return err
	}
	if err := c.ensureACLPaths(); err != nil {
		return err
	}
	parent := path[:strings.LastIndexByte(path, '/')]
	if err := c.createIfMissing(c.p(parent)); err != nil {
		return err
	}
	full := c.p(path)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var cur aclZNode
		data, st, err := c.conn.Get(full)
		exists := err == nil
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return fmt.Errorf("read %s: %w", path, err)
		default:
			if err := json.Unmarshal(data, &cur); err != nil {
				return fmt.Errorf("read %s: %w", path, err)
			}
		}
		next := edit(slices.Clone(cur.ACLs))
		if slices.Equal(next, cur.ACLs) {
			c.aclStore.Put(res, next)
			return nil
		}
		b := mustJSON(aclZNode{Version: 1, ACLs: next})
		switch {
		case len(next) == 0 && exists:
			err = c.conn.Delete(full, st.Version)
		case len(next) == 0:
		case exists:
			_, err = c.conn.Set(full, b, st.Version)
		default:
			_, err = c.conn.Create(full, b, 0, c.acl(full))
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) {
			continue // changed meanwhile: again, on what is there now
		}
		if errors.Is(err, zk.ErrNoAuth) {
			return fmt.Errorf("write %s: %w: %s", path, err, c.noAuthHint())
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		c.aclStore.Put(res, next)
		return c.announceACLChange(res)
	}
}

// announceACLChange adds Kafka's change notification for res.
func (c *Controller) announceACLChange(res controller.ACLResource) error {
	changes, data := kafkaACLChangesPath, []byte(res.Type+":"+res.Name)
	if res.Pattern != "LITERAL" {
		changes = kafkaACLExtChangesPath
		data = mustJSON(aclExtendedChange{Version: 1, ResourceType: res.Type, Name: res.Name, PatternType: res.Pattern})
	}
	full := c.p(changes + aclChangePrefix)
	if _, err := c.conn.Create(full, data, zk.FlagSequence, c.acl(full)); err != nil {
		return fmt.Errorf("announce ACL change in %s: %w", changes, err)
	}
	return nil
}

// purgeACLChanges deletes change notifications older than
// aclChangeExpiry.
func (c *Controller) purgeACLChanges() {
	for _, p := range []string{kafkaACLChangesPath, kafkaACLExtChangesPath} {
		names, _, err := c.conn.Children(c.p(p))
		if err != nil {
			continue
		}
		for _, n := range names {
			full := c.p(p + "/" + n)
			ok, st, err := c.conn.Exists(full)
			if err != nil || !ok || time.Since(time.UnixMilli(st.Ctime)) < aclChangeExpiry {
				continue
			}
			c.conn.Delete(full, -1) // another broker may have deleted it
		}
	}
}
