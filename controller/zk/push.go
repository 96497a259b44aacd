package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// The receiving side of the controller's inter-broker requests.
//
// As in Kafka's ZooKeeper mode, a broker that is not the active controller
// does not read topics and partition states from ZooKeeper: it learns
// them, and the live brokers, from the active controller's LeaderAndIsr,
// UpdateMetadata and StopReplica requests, and keeps them in a pushed
// state. Configs, the cluster id and the controller's identity are still
// read from ZooKeeper, as Kafka brokers do. The run goroutine builds the
// published snapshot from the pushed state (build).
//
// Ordering: a partition state replaces the one held only when its
// (leader epoch, partition epoch) is not older, so a delayed request never
// undoes a newer change (such as the leader's own ISR change, which it
// applies at once after writing it to ZooKeeper). A request from an older
// controller epoch than one already seen is refused whole
// (STALE_CONTROLLER_EPOCH). Every request must name this broker's exact
// epoch, the czxid of its registration (STALE_BROKER_EPOCH otherwise, -1
// included), and a controller epoch or sender this broker has not seen is
// believed only once ZooKeeper's /controller names that sender and
// /controller_epoch holds that epoch (confirmController): a request made
// up by a client with the highest epoch cannot shut the real controller
// out. Topic names and partition indexes are checked as a client's are
// (controller.ValidTopicName) before they reach the pushed state, and so
// the broker's directories and znode paths.
//
// The first UpdateMetadata for a (controller epoch, broker epoch) pair
// carries the whole cluster (the sender makes it so: it starts every
// broker over in a new term and at a new registration) and replaces the
// topics held; later ones change only the partitions they name, and a
// partition named with leader -2 (Kafka's LeaderDuringDelete) is gone.

// Kafka's sentinel leader and leader epoch of a partition being deleted.
const (
	leaderDuringDelete = -2
	epochDuringDelete  = -2
)

type pushed struct {
	mu        sync.Mutex
	ctrlEpoch int32 // the highest controller epoch seen
	// ctrlID is the controller confirmed to hold ctrlEpoch (ZooKeeper's
	// /controller, or this broker for the term it held); -1 none yet.
	ctrlID int32
	// The controller and broker epochs of the last UpdateMetadata applied.
	umEpoch       int32
	umBrokerEpoch int64
	synced        bool // an UpdateMetadata arrived: the broker knows the cluster
	brokers       []controller.Broker
	topics        map[string]*pushedTopic
	version       int64 // grows with every change
}

type pushedTopic struct {
	id    [16]byte
	parts map[int32]controller.Partition
	// described: an UpdateMetadata (or the seed) named the topic, so
	// parts holds all of it; LeaderAndIsr names only the partitions this
	// broker hosts (controller.Topic.Partial).
	described bool
}

// newer tells whether partition state b may replace a.
func newer(a, b controller.Partition) bool {
	if b.LeaderEpoch != a.LeaderEpoch {
		return b.LeaderEpoch > a.LeaderEpoch
	}
	return b.PartitionEpoch >= a.PartitionEpoch
}

// upsert stores a partition state unless the held one is newer. Called
// with mu held; reports whether the state was taken.
func (ps *pushed) upsert(topic string, id [16]byte, p controller.Partition) bool {
	t := ps.topics[topic]
	if t == nil || t.id != id {
		t = &pushedTopic{id: id, parts: map[int32]controller.Partition{}}
		ps.topics[topic] = t
	}
	if cur, ok := t.parts[p.Index]; ok && !newer(cur, p) {
		return false
	}
	t.parts[p.Index] = p
	return true
}

func (ps *pushed) remove(topic string, id [16]byte, part int32) {
	t := ps.topics[topic]
	if t == nil || t.id != id {
		return
	}
	delete(t.parts, part)
	if len(t.parts) == 0 {
		delete(ps.topics, topic)
	}
}

// seed replaces the pushed state with a snapshot (taken when this broker
// stops being the controller of epoch term, so it serves what it last knew
// until the next controller's first UpdateMetadata), unless a later
// controller has already told it the cluster.
func (ps *pushed) seed(md *controller.Metadata, term, self int32) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if term > ps.ctrlEpoch || term == ps.ctrlEpoch && ps.ctrlID < 0 {
		ps.ctrlEpoch, ps.ctrlID = term, self
	}
	if ps.umEpoch > term {
		return
	}
	ps.brokers = slices.Clone(md.Brokers)
	ps.topics = map[string]*pushedTopic{}
	for name, t := range md.Topics {
		pt := &pushedTopic{id: t.ID, parts: map[int32]controller.Partition{}, described: !t.Partial}
		for _, p := range t.Partitions {
			pt.parts[p.Index] = p
		}
		ps.topics[name] = pt
	}
	ps.version++
}

// fill puts the pushed brokers and topics into md (configs are added by
// build from ZooKeeper), and returns the pushed version and whether a
// controller has told this registration the whole cluster yet.
func (ps *pushed) fill(md *controller.Metadata, self controller.Broker) (int64, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	md.Brokers = slices.Clone(ps.brokers)
	if !slices.ContainsFunc(md.Brokers, func(b controller.Broker) bool { return b.ID == self.ID }) {
		md.Brokers = append(md.Brokers, self)
	}
	slices.SortFunc(md.Brokers, func(a, b controller.Broker) int { return int(a.ID - b.ID) })
	for name, pt := range ps.topics {
		t := &controller.Topic{Name: name, ID: pt.id, Configs: map[string]string{}, Partial: !pt.described}
		for i := int32(0); ; i++ {
			p, ok := pt.parts[i]
			if !ok {
				break // partitions are dense; a gap ends what can be served
			}
			p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
			t.Partitions = append(t.Partitions, p)
		}
		if len(t.Partitions) == 0 {
			continue
		}
		md.Topics[name] = t
		md.TopicIDs[t.ID] = name
	}
	return ps.version, ps.synced
}

// checkEpochs validates a request's controller and broker epochs,
// recording a newer controller epoch once confirmed (confirmed: ZooKeeper
// named ctrlID the controller of ctrlEpoch). It returns the refusal, or
// confirm when ZooKeeper must be asked first. Called with mu held.
func (c *Controller) checkEpochs(ctrlID, ctrlEpoch int32, brokerEpoch int64, confirmed bool) (refuse *kerr.Error, confirm bool) {
	ps := &c.pushed
	if ctrlEpoch < ps.ctrlEpoch {
		return kerr.StaleControllerEpoch, false
	}
	if own := c.ownEpoch.Load(); own <= 0 || brokerEpoch != own {
		return kerr.StaleBrokerEpoch, false
	}
	if ctrlEpoch == ps.ctrlEpoch && ctrlID == ps.ctrlID {
		return nil, false
	}
	if !confirmed {
		return nil, true
	}
	ps.ctrlEpoch, ps.ctrlID = ctrlEpoch, ctrlID
	return nil, false
}

// errUnconfirmed: ZooKeeper does not name the sender of a request the
// controller of its epoch.
var errUnconfirmed = errors.New("not the controller ZooKeeper names")

// confirmController reads /controller and /controller_epoch and reports
// whether they name ctrlID the active controller of ctrlEpoch.
func (c *Controller) confirmController(ctrlID, ctrlEpoch int32) error {
	data, _, err := c.conn.Get(c.p(controllerPath))
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("%w: request from controller %d epoch %d, zookeeper names no controller", errUnconfirmed, ctrlID, ctrlEpoch)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", controllerPath, err)
	}
	id, err := decodeController(data)
	if err != nil {
		return err
	}
	edata, _, err := c.conn.Get(c.p(controllerEpochPth))
	if err != nil {
		return fmt.Errorf("read %s: %w", controllerEpochPth, err)
	}
	epoch, err := strconv.ParseInt(strings.TrimSpace(string(edata)), 10, 32)
	if err != nil {
		return fmt.Errorf("%s: %w", controllerEpochPth, err)
	}
	if id != ctrlID || int32(epoch) != ctrlEpoch {
		return fmt.Errorf("%w: request from controller %d epoch %d, zookeeper names controller %d epoch %d",
			errUnconfirmed, ctrlID, ctrlEpoch, id, epoch)
	}
	return nil
}

// applied bumps the pushed version, kicks the run goroutine and waits
// (briefly) until the published snapshot includes the change, so that the
// answer to the controller means the broker acts on it. It reports whether
// it does; if not the controller is answered with an error and retries.
func (c *Controller) applied(ctx context.Context) bool {
	c.pushed.mu.Lock()
	c.pushed.version++
	v := c.pushed.version
	c.pushed.mu.Unlock()
	c.kickRun()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		c.mu.Lock()
		done, ch := c.pushedPublished >= v, c.pushedCh
		c.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-c.done:
			return false
		}
	}
}

// receive applies a controller request to the pushed state: apply runs
// with the state locked if the request's controller and broker epochs are
// current (checkEpochs), and the answer waits until the broker acts on the
// change. It returns the request's error code.
func (c *Controller) receive(ctx context.Context, ctrlID, ctrlEpoch int32, brokerEpoch int64, apply func(ps *pushed)) int16 {
	ps := &c.pushed
	confirmed := false
	for {
		ps.mu.Lock()
		refuse, confirm := c.checkEpochs(ctrlID, ctrlEpoch, brokerEpoch, confirmed)
		if refuse != nil {
			ps.mu.Unlock()
			return refuse.Code
		}
		if !confirm {
			break
		}
		ps.mu.Unlock()
		if err := c.confirmController(ctrlID, ctrlEpoch); err != nil {
			c.log.Warn("refused a controller request ZooKeeper does not confirm", "controller", ctrlID, "controller_epoch", ctrlEpoch, "err", err)
			if errors.Is(err, errUnconfirmed) {
				return kerr.StaleControllerEpoch.Code
			}
			return kerr.RequestTimedOut.Code // the controller retries
		}
		confirmed = true
	}
	apply(ps)
	ps.mu.Unlock()
	if !c.applied(ctx) {
		return kerr.RequestTimedOut.Code
	}
	return 0
}

// validPartition tells whether a topic and partition index named by the
// controller may reach the pushed state: a legal topic name and an index
// that is not negative, as a client's request is checked.
func validPartition(topic string, part int32) bool {
	return controller.ValidTopicName(topic) && part >= 0
}

func partitionFromLeaderAndISR(p *kmsg.LeaderAndISRRequestTopicPartition) controller.Partition {
	return controller.Partition{Index: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR), PartitionEpoch: p.ZKVersion}
}

// HandleLeaderAndISR applies a LeaderAndIsr request (API key 4): the
// partitions named become led or followed by this broker as they say.
func (c *Controller) HandleLeaderAndISR(ctx context.Context, req *kmsg.LeaderAndISRRequest) *kmsg.LeaderAndISRResponse {
	resp := req.ResponseKind().(*kmsg.LeaderAndISRResponse)
	self := c.opts.Broker.ID
	resp.ErrorCode = c.receive(ctx, req.ControllerID, req.ControllerEpoch, req.BrokerEpoch, func(ps *pushed) {
		for _, lv := range req.LiveLeaders {
			b := controller.Broker{ID: lv.BrokerID, Host: lv.Host, Port: lv.Port}
			if l := c.opts.InterBrokerListener; l != "" {
				b.Endpoints = []controller.Endpoint{{Listener: l, Host: lv.Host, Port: lv.Port, SecurityProtocol: c.opts.InterBrokerProtocol}}
			}
			ps.addBroker(b)
		}
		for _, ts := range req.TopicStates {
			rt := kmsg.NewLeaderAndISRResponseTopic()
			rt.TopicID = ts.TopicID
			for i := range ts.PartitionStates {
				p := &ts.PartitionStates[i]
				rp := kmsg.NewLeaderAndISRResponseTopicPartition()
				rp.Topic, rp.Partition = ts.Topic, p.Partition
				switch {
				case !controller.ValidTopicName(ts.Topic):
					rp.ErrorCode = kerr.InvalidTopicException.Code
				case p.Partition < 0:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case !slices.Contains(p.Replicas, self):
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case !ps.upsert(ts.Topic, ts.TopicID, partitionFromLeaderAndISR(p)):
					rp.ErrorCode = kerr.StaleControllerEpoch.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	})
	return resp
}

// addBroker adds or updates a broker's address, keeping its rack. Called
// with mu held.
func (ps *pushed) addBroker(b controller.Broker) {
	for i, have := range ps.brokers {
		if have.ID == b.ID {
			if len(have.Endpoints) > 0 && len(b.Endpoints) <= 1 {
				return // a live leader's one endpoint: UpdateMetadata's are whole
			}
			b.Rack = have.Rack
			ps.brokers[i] = b
			return
		}
	}
	ps.brokers = append(ps.brokers, b)
}

// HandleUpdateMetadata applies an UpdateMetadata request (API key 6): the
// live brokers and the state of the partitions named.
func (c *Controller) HandleUpdateMetadata(ctx context.Context, req *kmsg.UpdateMetadataRequest) *kmsg.UpdateMetadataResponse {
	resp := req.ResponseKind().(*kmsg.UpdateMetadataResponse)
	resp.ErrorCode = c.receive(ctx, req.ControllerID, req.ControllerEpoch, req.BrokerEpoch, func(ps *pushed) {
		if req.ControllerEpoch != ps.umEpoch || req.BrokerEpoch != ps.umBrokerEpoch {
			ps.topics = map[string]*pushedTopic{} // the whole cluster follows
		}
		ps.synced, ps.umEpoch, ps.umBrokerEpoch = true, req.ControllerEpoch, req.BrokerEpoch
		ps.brokers = ps.brokers[:0]
		for _, lb := range req.LiveBrokers {
			b := controller.Broker{ID: lb.ID, Host: lb.Host, Port: lb.Port, Rack: lb.Rack}
			for _, e := range lb.Endpoints {
				b.Endpoints = append(b.Endpoints, controller.Endpoint{Listener: e.ListenerName, Host: e.Host, Port: e.Port, SecurityProtocol: e.SecurityProtocol})
			}
			if len(lb.Endpoints) > 0 {
				b.Host, b.Port = lb.Endpoints[0].Host, lb.Endpoints[0].Port
			}
			ps.brokers = append(ps.brokers, b)
		}
		for _, ts := range req.TopicStates {
			for i := range ts.PartitionStates {
				p := &ts.PartitionStates[i]
				if !validPartition(ts.Topic, p.Partition) {
					c.log.Warn("UpdateMetadata names an illegal topic or partition; skipped", "topic", ts.Topic, "partition", p.Partition)
					continue
				}
				if p.Leader == leaderDuringDelete {
					ps.remove(ts.Topic, ts.TopicID, p.Partition)
					continue
				}
				ps.upsert(ts.Topic, ts.TopicID, controller.Partition{Index: p.Partition, Leader: p.Leader,
					LeaderEpoch: p.LeaderEpoch, Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR),
					PartitionEpoch: p.ZKVersion})
				if pt := ps.topics[ts.Topic]; pt != nil && pt.id == ts.TopicID {
					pt.described = true
				}
			}
		}
	})
	return resp
}

// HandleStopReplica applies a StopReplica request (API key 5): this broker
// stops hosting the partitions named with Delete set, and deletes their
// logs (the broker removes a log once its partition no longer names it as
// a replica). A partition being deleted (leader epoch -2) is dropped from
// the metadata; otherwise this broker is taken out of its replicas.
// Without Delete a replica is only stopped in Kafka; Strata stops replicas
// that way only when the broker itself shuts down, so such a partition is
// left as it is.
func (c *Controller) HandleStopReplica(ctx context.Context, req *kmsg.StopReplicaRequest) *kmsg.StopReplicaResponse {
	resp := req.ResponseKind().(*kmsg.StopReplicaResponse)
	self := c.opts.Broker.ID
	resp.ErrorCode = c.receive(ctx, req.ControllerID, req.ControllerEpoch, req.BrokerEpoch, func(ps *pushed) {
		for _, t := range req.Topics {
			for _, st := range t.PartitionStates {
				rp := kmsg.NewStopReplicaResponsePartition()
				rp.Topic, rp.Partition = t.Topic, st.Partition
				if !validPartition(t.Topic, st.Partition) {
					rp.ErrorCode = kerr.InvalidTopicException.Code
					resp.Partitions = append(resp.Partitions, rp)
					continue
				}
				resp.Partitions = append(resp.Partitions, rp)
				if !st.Delete {
					continue
				}
				pt := ps.topics[t.Topic]
				cur, ok := controller.Partition{}, false
				if pt != nil {
					cur, ok = pt.parts[st.Partition]
				}
				switch {
				case !ok:
				case st.LeaderEpoch == epochDuringDelete:
					ps.remove(t.Topic, pt.id, st.Partition)
				case st.LeaderEpoch >= 0 && st.LeaderEpoch < cur.LeaderEpoch:
					resp.Partitions[len(resp.Partitions)-1].ErrorCode = kerr.FencedLeaderEpoch.Code
				default:
					cur.Replicas = slices.DeleteFunc(slices.Clone(cur.Replicas), func(id int32) bool { return id == self })
					cur.ISR = slices.DeleteFunc(slices.Clone(cur.ISR), func(id int32) bool { return id == self })
					pt.parts[st.Partition] = cur
				}
			}
		}
	})
	return resp
}

// pushLocal applies a partition state this broker wrote to ZooKeeper
// itself (a leader's ISR change), so it acts on it before the controller
// echoes it.
func (c *Controller) pushLocal(topic string, id [16]byte, p controller.Partition) {
	c.pushed.mu.Lock()
	c.pushed.upsert(topic, id, p)
	c.pushed.mu.Unlock()
	c.applied(context.Background())
}
