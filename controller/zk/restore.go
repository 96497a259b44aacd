package zk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// Restore writes a cluster's topics, dynamic broker configs and producer
// id block into a ZooKeeper that lost them (strata admin restore, from the
// metadata snapshot in the bucket), as Kafka's ZooKeeper-mode tools
// created topics: the config znode, then the topic znode with its topic id
// and assignment, and a config change notification; the active controller
// gives the new partitions their first states. Topics keep their ids, so
// that their segments in the bucket are theirs again; last, the cluster
// takes the snapshot's cluster id (/cluster/id), so that the bucket's
// history keeps one owner and the brokers write its snapshots again.

// RestoreTopic is one topic to write back.
type RestoreTopic struct {
	Name     string
	ID       [16]byte
	Replicas [][]int32
	Configs  map[string]string
}

// RestoreRequest is what Restore writes.
type RestoreRequest struct {
	Topics []RestoreTopic
	// BrokerConfigs by broker id ("" for the cluster default).
	BrokerConfigs map[string]map[string]string
	// ACLs are the authorizer's ACLs by resource pattern: a resource
	// pattern that has ACLs in ZooKeeper already keeps them.
	ACLs map[controller.ACLResource][]controller.ACLEntry
	// NextProducerID is the first producer id the cluster may hand out.
	NextProducerID int64
	// ClusterID is the cluster id the cluster takes (the snapshot's),
	// written after everything else; "" keeps the cluster's.
	ClusterID string
	// Auth authenticates the session and sets the ACLs of what Restore
	// creates, as the brokers' (zookeeper.set.acl and the digest
	// credentials of the cluster's brokers).
	Auth Auth
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	Created  []string // topics written
	Existing []string // topics already there with the same id
	// Remapped are the topics some of whose replicas named brokers that
	// are not registered, moved to registered ones.
	Remapped []string
	// ACLs counts the resource patterns whose ACLs were written;
	// ExistingACLs those that had ACLs already (left as they were).
	ACLs, ExistingACLs int
	// PreviousClusterID is the cluster id ZooKeeper held before, when
	// Restore replaced it.
	PreviousClusterID string
}

// Restore connects to ZooKeeper (connect as Kafka's zookeeper.connect,
// chroot included) and writes req. A topic already there under another id
// is an error; under the same id it is left as it is.
func Restore(ctx context.Context, connect string, req RestoreRequest) (RestoreResult, error) {
	var res RestoreResult
	servers, chroot := splitConnect(connect)
	if len(servers) == 0 {
		return res, fmt.Errorf("zookeeper connect string %q has no servers", connect)
	}
	if err := req.Auth.Validate(); err != nil {
		return res, err
	}
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkLogger{slog.New(slog.DiscardHandler)}))
	if err != nil {
		return res, fmt.Errorf("connect to zookeeper %s: %w", connect, err)
	}
	defer conn.Close()
	c := &Controller{conn: conn, chroot: chroot, acls: newACLPolicy(req.Auth, chroot),
		opts: Options{Auth: req.Auth}, log: slog.New(slog.DiscardHandler)}
	deadline := time.Now().Add(10 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("no zookeeper session with %s", connect)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := req.Auth.addAuth(conn); err != nil {
		return res, err
	}
	if err := c.ensurePersistentPaths(); err != nil {
		return res, err
	}
	ids, _, err := conn.Children(c.p(brokerIDsPath))
	if err != nil {
		return res, fmt.Errorf("list %s: %w", brokerIDsPath, err)
	}
	var live []int32
	for _, s := range ids {
		if n, err := strconv.ParseInt(s, 10, 32); err == nil {
			live = append(live, int32(n))
		}
	}
	slices.Sort(live)
	if len(live) == 0 {
		return res, errors.New("no broker is registered in zookeeper: start the brokers first")
	}
	for _, t := range req.Topics {
		data, _, err := conn.Get(c.p(topicPath(t.Name)))
		switch {
		case err == nil:
			id, _, derr := decodeTopic(data)
			if derr != nil || id != t.ID {
				return res, fmt.Errorf("topic %s exists with another topic id: restore into a fresh zookeeper", t.Name)
			}
			res.Existing = append(res.Existing, t.Name)
			continue
		case !errors.Is(err, zk.ErrNoNode):
			return res, fmt.Errorf("read topic %s: %w", t.Name, err)
		}
		assign, remapped, err := remapReplicas(t.Replicas, live)
		if err != nil {
			return res, fmt.Errorf("topic %s: %w", t.Name, err)
		}
		var ops []any
		if ok, st, err := conn.Exists(c.p(topicConfigPath(t.Name))); err != nil {
			return res, err
		} else if ok {
			ops = append(ops, &zk.SetDataRequest{Path: c.p(topicConfigPath(t.Name)), Data: encodeConfig(t.Configs), Version: st.Version})
		} else {
			ops = append(ops, &zk.CreateRequest{Path: c.p(topicConfigPath(t.Name)), Data: encodeConfig(t.Configs), Acl: c.acl(c.p(topicConfigPath(t.Name)))})
		}
		ops = append(ops,
			&zk.CreateRequest{Path: c.p(topicPath(t.Name)), Data: encodeTopic(t.ID, assign), Acl: c.acl(c.p(topicPath(t.Name)))},
			&zk.CreateRequest{Path: c.p(configChangesPath + "/config_change_"), Data: encodeConfigChange("topics/" + t.Name), Acl: c.acl(c.p(configChangesPath + "/config_change_")), Flags: zk.FlagSequence})
		if _, err := conn.Multi(ops...); err != nil {
			return res, fmt.Errorf("write topic %s: %w", t.Name, err)
		}
		res.Created = append(res.Created, t.Name)
		if remapped {
			res.Remapped = append(res.Remapped, t.Name)
		}
	}
	for _, b := range slices.Sorted(maps.Keys(req.BrokerConfigs)) {
		cfg := req.BrokerConfigs[b]
		if len(cfg) == 0 {
			continue
		}
		path := brokerConfigsPath + "/" + brokerEntity(b)
		if ok, _, err := conn.Exists(c.p(path)); err != nil {
			return res, err
		} else if ok {
			continue // set in the new cluster already: it wins
		}
		if _, err := conn.Multi(&zk.CreateRequest{Path: c.p(path), Data: encodeConfig(cfg), Acl: c.acl(c.p(path))},
			&zk.CreateRequest{Path: c.p(configChangesPath + "/config_change_"), Data: encodeConfigChange("brokers/" + brokerEntity(b)), Acl: c.acl(c.p(configChangesPath + "/config_change_")), Flags: zk.FlagSequence}); err != nil {
			return res, fmt.Errorf("write configs of broker %q: %w", brokerEntity(b), err)
		}
	}
	if err := c.restoreACLs(req.ACLs, &res); err != nil {
		return res, err
	}
	if req.NextProducerID > 0 {
		if err := c.raiseProducerIDBlock(c.p(producerIDPath), req.NextProducerID); err != nil {
			return res, err
		}
	}
	if req.ClusterID != "" {
		prev, err := c.setClusterID(c.p(clusterIDPath), req.ClusterID)
		if err != nil {
			return res, err
		}
		if prev != req.ClusterID {
			res.PreviousClusterID = prev
		}
	}
	return res, nil
}

// restoreACLs writes the ACLs of each resource pattern that has none, with
// its change notification, so that running brokers apply them.
func (c *Controller) restoreACLs(acls map[controller.ACLResource][]controller.ACLEntry, res *RestoreResult) error {
	if len(acls) == 0 {
		return nil
	}
	if err := c.ensureACLPaths(); err != nil {
		return err
	}
	keys := slices.SortedFunc(maps.Keys(acls), func(a, b controller.ACLResource) int {
		return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(a.Pattern, b.Pattern), strings.Compare(a.Name, b.Name))
	})
	for _, r := range keys {
		entries := acls[r]
		if len(entries) == 0 {
			continue
		}
		path, err := aclResourcePath(r)
		if err != nil {
			return fmt.Errorf("ACLs of %s %s %q: %w", r.Type, r.Pattern, r.Name, err)
		}
		if err := c.createIfMissing(c.p(path[:strings.LastIndexByte(path, '/')])); err != nil {
			return err
		}
		full := c.p(path)
		_, err = c.conn.Create(full, mustJSON(aclZNode{Version: 1, ACLs: entries}), 0, c.acl(full))
		switch {
		case errors.Is(err, zk.ErrNodeExists):
			res.ExistingACLs++
			continue // set in the new cluster already: it wins
		case err != nil:
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := c.announceACLChange(r); err != nil {
			return err
		}
		res.ACLs++
	}
	return nil
}

// setClusterID makes /cluster/id name id, in Kafka's form, and returns
// the id it named before ("" when it was missing).
func (c *Controller) setClusterID(path, id string) (string, error) {
	conn := c.conn
	data, _ := json.Marshal(clusterIDZNode{Version: "1", ID: id})
	for {
		cur, st, err := conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			if _, err := conn.Create(path, data, 0, c.acl(path)); errors.Is(err, zk.ErrNodeExists) {
				continue
			} else if err != nil {
				return "", fmt.Errorf("write %s: %w", clusterIDPath, err)
			}
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", clusterIDPath, err)
		}
		var prev clusterIDZNode
		_ = json.Unmarshal(cur, &prev)
		if prev.ID == id {
			return prev.ID, nil
		}
		if _, err := conn.Set(path, data, st.Version); errors.Is(err, zk.ErrBadVersion) {
			continue
		} else if err != nil {
			return "", fmt.Errorf("write %s: %w", clusterIDPath, err)
		}
		return prev.ID, nil
	}
}

// remapReplicas keeps each partition's replicas that are registered and
// replaces the others by registered brokers the partition does not use,
// spreading them round-robin.
func remapReplicas(replicas [][]int32, live []int32) ([][]int32, bool, error) {
	out := make([][]int32, len(replicas))
	remapped := false
	next := 0
	for p, rs := range replicas {
		if len(rs) > len(live) {
			return nil, false, fmt.Errorf("partition %d has %d replicas and only %d brokers are registered", p, len(rs), len(live))
		}
		nr := make([]int32, 0, len(rs))
		for _, r := range rs {
			if slices.Contains(live, r) {
				nr = append(nr, r)
			}
		}
		for len(nr) < len(rs) {
			b := live[next%len(live)]
			next++
			if !slices.Contains(nr, b) {
				nr = append(nr, b)
				remapped = true
			}
		}
		out[p] = nr
	}
	return out, remapped, nil
}

// raiseProducerIDBlock makes the next allocated producer id at least next.
func (c *Controller) raiseProducerIDBlock(path string, next int64) error {
	conn := c.conn
	block := encodeProducerIDBlock(-1, next-1, next-1)
	for {
		data, st, err := conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			if _, err := conn.Create(path, block, 0, c.acl(path)); errors.Is(err, zk.ErrNodeExists) {
				continue
			} else if err != nil {
				return fmt.Errorf("write %s: %w", producerIDPath, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", producerIDPath, err)
		}
		if _, end, err := decodeProducerIDBlock(data); err == nil && end+1 >= next {
			return nil
		}
		if _, err := conn.Set(path, block, st.Version); errors.Is(err, zk.ErrBadVersion) {
			continue
		} else if err != nil {
			return fmt.Errorf("write %s: %w", producerIDPath, err)
		}
		return nil
	}
}
