package zk

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// errReread: a step made a change it must read back; not a failure.
var errReread = errors.New("cluster id created; rereading")

// retryBackoff is how soon a failed step is tried again.
const retryBackoff = 100 * time.Millisecond

// run is the goroutine that owns the cache: it rebuilds the snapshot when a
// watch fires or the session changes, and acts as controller when elected.
func (c *Controller) run() {
	defer c.wg.Done()
	retry := time.NewTimer(0)
	defer retry.Stop()
	failures := retryLog{msg: "zookeeper metadata update failed"}
	for {
		select {
		case <-c.done:
			return
		case <-c.kick:
		case f := <-c.invalid:
			c.evict(f)
		case <-retry.C:
		}
	drain:
		for {
			select {
			case f := <-c.invalid:
				c.evict(f)
			default:
				break drain
			}
		}
		if err := c.step(); err != nil {
			select {
			case <-c.done:
				return
			default:
			}
			failures.failed(c.log, time.Now(), err)
			c.stepErr.Store(&err)
			retry.Reset(retryBackoff)
			continue
		}
		failures.succeeded(c.log, time.Now())
		c.stepErr.Store(nil)
	}
}

// view is a snapshot plus what the controller needs to change it.
type view struct {
	md        *controller.Metadata
	ctrlOwner int64 // session owning /controller; 0 when there is none
	epochs    map[int32]int64
	states    map[string][]stateInfo // by topic, by partition
	deleting  []string
	// full: read wholly from ZooKeeper; otherwise from the pushed state
	// of version pushedVersion.
	full          bool
	pushedVersion int64
	synced        bool // the pushed state holds the whole cluster
	// zxid is the ZooKeeper state a full view was read at: the newest
	// change among the znodes it read.
	zxid int64
}

type stateInfo struct {
	exists  bool
	s       partitionState
	version int32
}

func (c *Controller) step() error {
	if c.conn.State() != zk.StateHasSession {
		// Without ZooKeeper the broker still acts on what the controller
		// tells it, as Kafka's brokers do.
		c.active.Store(-1)
		c.stepDown()
		c.publishOffline()
		return nil // the next session event kicks us
	}
	sid := c.conn.SessionID()
	if sid != c.sessionID {
		// A new session: watches and ephemerals of the old one are gone.
		c.sessionID = sid
		c.cache = map[watchKey]*cached{}
		c.registered = false
		c.active.Store(-1)
	}
	if !c.registered {
		if err := c.register(); err != nil {
			return err
		}
		c.registered = true
	}
	own, err := c.get(brokerPath(c.opts.Broker.ID))
	if err != nil {
		return err
	}
	if !own.exists {
		// Our registration vanished (deleted by hand?): register again.
		c.registered = false
		return errors.New("own registration missing")
	}
	c.ownEpoch.Store(own.stat.Czxid)
	owner, err := c.controllerOwner()
	if err != nil {
		return err
	}
	if owner != sid || !c.IsActive() {
		c.stepDown()
	}
	v, err := c.buildConsistent(owner == sid)
	if err != nil {
		return err
	}
	switch {
	case v.ctrlOwner == 0:
		if err := c.tryElect(); err != nil {
			return err
		}
		// Our /controller watch rebuilds with the winner.
	case v.ctrlOwner == sid:
		if !c.IsActive() {
			if err := c.takeOver(sid); err != nil {
				return err
			}
		}
	default:
		c.active.Store(-1)
	}
	c.publish(v)
	// Brokers that came or went since the last view, told by the active
	// controller in its summary.
	var sum reconcileSummary
	registered := liveBrokers(v.md)
	if c.lastRegistered != nil {
		sum.gone, sum.back = brokerChanges(c.lastRegistered, registered)
	}
	c.lastRegistered = registered
	if c.IsActive() {
		c.wasActive = true
		md := c.Metadata()
		c.senders.update(md, v.epochs, c.epoch.Load(), v.zxid)
		return c.reconcile(v, &sum)
	}
	return nil
}

// stepDown ends this broker's term as controller, if it had one: its
// senders stop, and it serves what it knew until the next controller tells
// it more.
func (c *Controller) stepDown() {
	if !c.wasActive {
		return
	}
	c.wasActive = false
	c.senders.stop()
	c.pushed.seed(c.Metadata(), c.epoch.Load(), c.opts.Broker.ID)
}

// publishOffline publishes the pushed state while ZooKeeper cannot be
// read: configs and the rest are kept from the last snapshot.
func (c *Controller) publishOffline() {
	cur := c.Metadata()
	// The brokers' epochs last read stay known, so that a leader keeps
	// serving its followers' fetches (which carry them) while ZooKeeper
	// is away.
	c.mu.Lock()
	epochs := maps.Clone(c.epochs)
	c.mu.Unlock()
	if epochs == nil {
		epochs = map[int32]int64{}
	}
	epochs[c.opts.Broker.ID] = c.ownEpoch.Load()
	v := &view{md: emptyMetadata(), epochs: epochs}
	v.md.ClusterID, v.md.BrokerConfigs, v.md.NextProducerID = cur.ClusterID, cur.BrokerConfigs, cur.NextProducerID
	v.md.ScramUsers = cur.ScramUsers
	v.pushedVersion, v.synced = c.pushed.fill(v.md, c.opts.Broker)
	for name, t := range v.md.Topics {
		if old := cur.Topics[name]; old != nil && old.ID == t.ID {
			t.Configs = old.Configs
		}
	}
	c.publish(v)
}

// controllerOwner returns the session that holds /controller, 0 if none.
func (c *Controller) controllerOwner() (int64, error) {
	e, err := c.get(controllerPath)
	if err != nil || !e.exists {
		return 0, err
	}
	return e.stat.EphemeralOwner, nil
}

// register creates this broker's ephemeral znode. A znode left by an
// earlier session of the same id blocks registration until that session
// expires.
func (c *Controller) register() error {
	path := brokerPath(c.opts.Broker.ID)
	_, err := c.conn.Create(c.p(path), encodeBroker(c.opts.Broker), zk.FlagEphemeral, c.acl(c.p(path)))
	if err == nil {
		c.log.Info("registered broker in zookeeper", "path", path)
		return nil
	}
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("register %s: %w: %s", path, err, c.noAuthHint())
	}
	if !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("register %s: %w", path, err)
	}
	_, st, err := c.conn.Get(c.p(path))
	if err != nil {
		return fmt.Errorf("register %s: %w", path, err)
	}
	if st.EphemeralOwner == c.conn.SessionID() {
		return nil
	}
	c.log.Warn("broker id registered by another zookeeper session; waiting for it to expire", "path", path, "owner", st.EphemeralOwner)
	return fmt.Errorf("register %s: held by session %#x", path, st.EphemeralOwner)
}

// buildConsistent builds a view; a full one (what the active controller
// sends the brokers) is read again until it is what ZooKeeper held at one
// zxid (watch.go).
func (c *Controller) buildConsistent(full bool) (*view, error) {
	for range maxConsistentReads {
		v, err := c.build(full)
		if err != nil || !full {
			return v, err
		}
		dropped, err := c.dropChanged()
		if err != nil {
			return nil, err
		}
		if !dropped {
			return v, nil
		}
	}
	return nil, errors.New("zookeeper changed during every read of a consistent view")
}

// build reads the cluster: all of it from ZooKeeper (through the cache)
// when full, as the active controller does; otherwise the topics and live
// brokers come from the pushed state (push.go) and only the configs, the
// cluster id and the controller's identity from ZooKeeper.
func (c *Controller) build(full bool) (*view, error) {
	v := &view{md: emptyMetadata(), epochs: map[int32]int64{}, states: map[string][]stateInfo{}, full: full}
	md := v.md

	e, err := c.get(clusterIDPath)
	if err != nil {
		return nil, err
	}
	if !e.exists {
		id := controller.NewTopicID()
		data, _ := json.Marshal(clusterIDZNode{Version: "1", ID: encodeUUID(id)})
		if _, err := c.conn.Create(c.p(clusterIDPath), data, 0, c.acl(c.p(clusterIDPath))); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return nil, fmt.Errorf("create %s: %w", clusterIDPath, err)
		}
		return nil, errReread
	}
	var cid clusterIDZNode
	if err := json.Unmarshal(e.data, &cid); err != nil {
		c.log.Warn("bad cluster id znode", "err", err)
	}
	md.ClusterID = cid.ID

	if e, err = c.get(controllerPath); err != nil {
		return nil, err
	}
	if e.exists {
		id, err := decodeController(e.data)
		if err != nil {
			c.log.Warn("bad controller znode", "err", err)
		}
		md.ControllerID, v.ctrlOwner = id, e.stat.EphemeralOwner
	}

	if full {
		if err := c.buildBrokersAndTopics(v); err != nil {
			return nil, err
		}
		v.zxid = c.cacheZxid()
	} else {
		v.pushedVersion, v.synced = c.pushed.fill(md, c.opts.Broker)
		v.epochs[c.opts.Broker.ID] = c.ownEpoch.Load()
		// The other brokers' epochs, the czxid of their registrations,
		// read here as the active controller reads them: a leader checks
		// a follower's fetch against them (KIP-903's ReplicaEpoch).
		for _, b := range md.Brokers {
			if b.ID == c.opts.Broker.ID || b.ID < 0 {
				continue
			}
			e, err := c.get(brokerPath(b.ID))
			if err != nil {
				return nil, err
			}
			if e.exists {
				v.epochs[b.ID] = e.stat.Czxid
			}
		}
		for name, t := range md.Topics {
			e, err := c.get(topicConfigPath(name))
			if err != nil {
				return nil, err
			}
			if e.exists {
				if cfg, err := decodeConfig(e.data); err == nil {
					t.Configs = cfg
				}
			}
		}
	}

	entities, err := c.children(brokerConfigsPath)
	if err != nil {
		return nil, err
	}
	for _, ent := range entities {
		e, err := c.get(brokerConfigsPath + "/" + ent)
		if err != nil {
			return nil, err
		}
		if !e.exists {
			continue
		}
		cfg, err := decodeConfig(e.data)
		if err != nil || len(cfg) == 0 {
			continue
		}
		if ent == defaultBrokerEntity {
			ent = ""
		}
		md.BrokerConfigs[ent] = cfg
	}

	if err := c.buildScramUsers(md); err != nil {
		return nil, err
	}

	if e, err = c.get(producerIDPath); err != nil {
		return nil, err
	}
	if e.exists {
		if _, end, err := decodeProducerIDBlock(e.data); err == nil {
			md.NextProducerID = end + 1
		}
	}
	return v, nil
}

// buildBrokersAndTopics reads the registered brokers and every topic with
// its partition states from ZooKeeper.
func (c *Controller) buildBrokersAndTopics(v *view) error {
	md := v.md
	ids, err := c.children(brokerIDsPath)
	if err != nil {
		return err
	}
	var paths []string
	for _, s := range ids {
		if n, err := strconv.ParseInt(s, 10, 32); err == nil {
			paths = append(paths, brokerPath(int32(n)))
		}
	}
	c.prefetch(paths)
	for _, s := range ids {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			continue
		}
		e, err := c.get(brokerPath(int32(n)))
		if err != nil {
			return err
		}
		if !e.exists {
			continue
		}
		b, err := decodeBroker(int32(n), e.data)
		if err != nil {
			c.log.Warn("skipping broker with bad znode", "err", err)
			continue
		}
		md.Brokers = append(md.Brokers, b)
		v.epochs[b.ID] = e.stat.Czxid
	}
	c.mu.Lock()
	for id, epoch := range c.shuttingDown {
		if v.epochs[id] != epoch {
			delete(c.shuttingDown, id) // gone, or back with a new registration
		}
	}
	c.mu.Unlock()
	slices.SortFunc(md.Brokers, func(a, b controller.Broker) int { return int(a.ID - b.ID) })

	if v.deleting, err = c.children(deleteTopicsPath); err != nil {
		return err
	}
	names, err := c.children(topicsPath)
	if err != nil {
		return err
	}
	c.prefetchTopics(names)
	for _, name := range names {
		if slices.Contains(v.deleting, name) {
			continue
		}
		t, states, err := c.buildTopic(name)
		if err != nil {
			return err
		}
		if t != nil {
			md.Topics[name] = t
			md.TopicIDs[t.ID] = name
			v.states[name] = states
		}
	}
	return nil
}

// prefetchTopics warms the cache with the topic znodes, then with their
// partition states and configs.
func (c *Controller) prefetchTopics(names []string) {
	var paths []string
	for _, name := range names {
		paths = append(paths, topicPath(name), topicConfigPath(name))
	}
	c.prefetch(paths)
	paths = paths[:0]
	for _, name := range names {
		e := c.cache[watchKey{watchData, topicPath(name)}]
		if e == nil || !e.exists {
			continue
		}
		if _, assign, err := decodeTopic(e.data); err == nil {
			for p := range assign {
				paths = append(paths, statePath(name, int32(p)))
			}
		}
	}
	c.prefetch(paths)
}

// buildTopic reads one topic; nil when it is missing or unreadable.
func (c *Controller) buildTopic(name string) (*controller.Topic, []stateInfo, error) {
	e, err := c.get(topicPath(name))
	if err != nil || !e.exists {
		return nil, nil, err
	}
	id, assign, ra, err := decodeTopicFull(e.data)
	if err != nil {
		c.log.Warn("skipping topic with bad znode", "topic", name, "err", err)
		return nil, nil, nil
	}
	t := &controller.Topic{Name: name, ID: id, Configs: map[string]string{}}
	states := make([]stateInfo, len(assign))
	for p, replicas := range assign {
		part := controller.Partition{Index: int32(p), Leader: -1, Replicas: replicas, ISR: []int32{},
			AddingReplicas: ra.adding[int32(p)], RemovingReplicas: ra.removing[int32(p)]}
		e, err := c.get(statePath(name, int32(p)))
		if err != nil {
			return nil, nil, err
		}
		if e.exists {
			if s, err := decodeState(e.data); err == nil {
				part.Leader, part.LeaderEpoch, part.ISR = s.Leader, s.LeaderEpoch, s.ISR
				part.PartitionEpoch = e.stat.Version
				states[p] = stateInfo{exists: true, s: s, version: e.stat.Version}
			} else {
				c.log.Warn("bad partition state znode", "topic", name, "partition", p, "err", err)
			}
		}
		if part.ISR == nil {
			part.ISR = []int32{}
		}
		t.Partitions = append(t.Partitions, part)
	}
	if e, err = c.get(topicConfigPath(name)); err != nil {
		return nil, nil, err
	}
	if e.exists {
		if cfg, err := decodeConfig(e.data); err == nil {
			t.Configs = cfg
		}
	}
	return t, states, nil
}

// publish replaces the snapshot if anything in it changed.
func (c *Controller) publish(v *view) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epochs = v.epochs
	if v.pushedVersion > c.pushedPublished {
		defer func() {
			c.pushedPublished = v.pushedVersion
			close(c.pushedCh)
			c.pushedCh = make(chan struct{})
		}()
	}
	if (v.full && c.IsActive()) || v.synced {
		c.readyOnce.Do(func() { close(c.ready) })
	}
	next := *v.md
	next.Version = c.md.Version
	if reflect.DeepEqual(&next, c.md) {
		return
	}
	next.Version++
	c.md = &next
	close(c.changed)
	c.changed = make(chan struct{})
}
