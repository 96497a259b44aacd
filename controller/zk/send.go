package zk

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// The sending side: the active controller tells every other live broker
// what changed with Kafka's inter-broker requests, LeaderAndIsr to the
// replicas of partitions whose leader or replicas changed, StopReplica
// (with Delete) to brokers that no longer host a partition, and
// UpdateMetadata to all of them, in that order.
//
// One goroutine per broker (a peer) keeps that broker in step with the
// newest snapshot rather than replaying a queue: it sends what differs
// between the snapshot the broker acknowledged and the newest one, so a
// slow or unreachable broker costs one diff when it comes back, not a
// backlog. A new controller epoch, or a new registration of the broker
// (broker epoch), starts it over with the whole cluster, on a new link
// (Transport.Open).

// Transport delivers the controller's requests to the brokers, over one
// link per peer.
type Transport interface {
	// Open returns a link to one registration of a broker (a peer's: a
	// new registration, like a new term or address, gets a new peer and
	// a new link). A link never sends over a connection of an earlier
	// link: a registration is a broker process, and a connection to the
	// process of an earlier registration at the same address is dead
	// (its first request would fail, and the restarted broker would
	// wait a sendRetry for its metadata), as in Kafka, whose controller
	// makes a channel per broker at its registration.
	Open(to controller.Broker) Link
	Close()
}

// Link delivers the controller's requests to one registration of a
// broker. Send may be called again after an error; Close ends the link
// (an outstanding Send fails).
type Link interface {
	Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// sendRetry is how soon a failed send to a broker is tried again.
const sendRetry = 200 * time.Millisecond

// sendTimeout bounds one request to a broker.
const sendTimeout = 10 * time.Second

type topicPart struct {
	topic string
	part  int32
}

type partRec struct {
	topicID [16]byte
	p       controller.Partition
}

// snapshot is what the controller wants every broker to know.
type snapshot struct {
	version   int64
	ctrlID    int32
	ctrlEpoch int32
	brokers   []controller.Broker
	parts     map[topicPart]partRec
	// zxid is the ZooKeeper state the snapshot was read at.
	zxid int64
}

// sendHook, when set (by tests, before any Controller starts), sees every
// request a controller sends, with the zxid of the snapshot it was built
// from.
var sendHook func(from, to int32, zxid int64, req kmsg.Request)

type senders struct {
	c         *Controller
	transport Transport

	mu     sync.Mutex
	latest *snapshot
	peers  map[int32]*peer
	acked  chan struct{} // closed and replaced at every acknowledgement
}

type peer struct {
	s      *senders
	broker controller.Broker
	epoch  int64
	link   Link // to this registration of the broker; closed by run
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}

	// Owned by run; ackedVersion is read under senders.mu.
	acked        *snapshot
	ackedVersion int64
}

func newSenders(c *Controller, t Transport) *senders {
	return &senders{c: c, transport: t, peers: map[int32]*peer{}, acked: make(chan struct{})}
}

// update publishes a new snapshot to every live broker but self (those in
// controlled shutdown too, as Kafka's liveOrShuttingDownBrokers); epochs
// are their broker epochs.
func (s *senders) update(md *controller.Metadata, epochs map[int32]int64, ctrlEpoch int32, zxid int64) {
	snap := &snapshot{version: md.Version, ctrlID: md.ControllerID, ctrlEpoch: ctrlEpoch,
		brokers: md.Brokers, parts: map[topicPart]partRec{}, zxid: zxid}
	for name, t := range md.Topics {
		for _, p := range t.Partitions {
			snap.parts[topicPart{name, p.Index}] = partRec{t.ID, p}
		}
	}
	self := s.c.opts.Broker.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest != nil && s.latest.ctrlEpoch != ctrlEpoch {
		s.stopAllLocked() // a new term starts every broker over
	}
	s.latest = snap
	want := map[int32]controller.Broker{}
	for _, b := range md.Brokers {
		if b.ID != self {
			want[b.ID] = b
		}
	}
	for id, p := range s.peers {
		b, ok := want[id]
		if !ok || !slices.Equal(brokerEndpoints(b), brokerEndpoints(p.broker)) || epochs[id] != p.epoch {
			p.halt()
			delete(s.peers, id)
		}
	}
	for id, b := range want {
		p := s.peers[id]
		if p == nil {
			p = &peer{s: s, broker: b, epoch: epochs[id], link: s.transport.Open(b),
				wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
			s.peers[id] = p
			go p.run()
		}
		p.poke()
	}
}

// stop ends every peer (this broker is no longer the controller).
func (s *senders) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopAllLocked()
	s.latest = nil
}

// close stops every peer and waits for their goroutines.
func (s *senders) close() {
	s.mu.Lock()
	var done []chan struct{}
	for _, p := range s.peers {
		done = append(done, p.done)
	}
	s.stopAllLocked()
	s.latest = nil
	s.mu.Unlock()
	for _, d := range done {
		<-d
	}
}

func (s *senders) stopAllLocked() {
	for id, p := range s.peers {
		p.halt()
		delete(s.peers, id)
	}
}

// waitSynced waits until every peer but except has acknowledged a snapshot
// of at least version (or is gone), or ctx ends.
func (s *senders) waitSynced(ctx context.Context, version int64, except int32) error {
	for {
		s.mu.Lock()
		ok := true
		for id, p := range s.peers {
			if id != except && p.ackedVersion < version {
				ok = false
			}
		}
		ch := s.acked
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *peer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) halt() {
	close(p.stop)
}

func (p *peer) run() {
	defer close(p.done)
	defer p.link.Close()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	failures := retryLog{msg: "send to broker failed"}
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-retry.C:
		}
		p.s.mu.Lock()
		snap := p.s.latest
		p.s.mu.Unlock()
		if snap == nil || (p.acked != nil && p.acked.version == snap.version) {
			continue
		}
		if err := p.sync(snap); err != nil {
			select {
			case <-p.stop:
				return
			default:
			}
			failures.failed(p.s.c.log, time.Now(), err, "to", p.broker.ID)
			retry.Reset(sendRetry)
			continue
		}
		failures.succeeded(p.s.c.log, time.Now(), "to", p.broker.ID)
		p.acked = snap
		p.s.mu.Lock()
		p.ackedVersion = snap.version
		close(p.s.acked)
		p.s.acked = make(chan struct{})
		p.s.mu.Unlock()
	}
}

// sync brings the broker from what it acknowledged to snap.
func (p *peer) sync(snap *snapshot) error {
	id := p.broker.ID
	full := p.acked == nil
	var old map[topicPart]partRec
	if !full {
		old = p.acked.parts
	}
	var lead, meta, stop []topicPart
	for k, r := range snap.parts {
		o, had := old[k]
		if !had || o.topicID != r.topicID || o.p.Leader != r.p.Leader || o.p.LeaderEpoch != r.p.LeaderEpoch || !slices.Equal(o.p.Replicas, r.p.Replicas) {
			if slices.Contains(r.p.Replicas, id) {
				lead = append(lead, k)
			}
		}
		if !had || o.topicID != r.topicID || o.p.PartitionEpoch != r.p.PartitionEpoch || o.p.LeaderEpoch != r.p.LeaderEpoch ||
			o.p.Leader != r.p.Leader || !slices.Equal(o.p.ISR, r.p.ISR) || !slices.Equal(o.p.Replicas, r.p.Replicas) {
			meta = append(meta, k)
		}
		if had && slices.Contains(o.p.Replicas, id) && !slices.Contains(r.p.Replicas, id) {
			stop = append(stop, k)
		}
	}
	names := map[string]bool{}
	for k := range snap.parts {
		names[k.topic] = true
	}
	var gone []topicPart
	for k, o := range old {
		if _, ok := snap.parts[k]; !ok {
			gone = append(gone, k)
			// A topic created again under the same name replaces the old
			// one whole on the receiver (new topic id): a StopReplica,
			// which names no topic id, would hit the new one.
			if slices.Contains(o.p.Replicas, id) && !names[k.topic] {
				stop = append(stop, k)
			}
		}
	}
	brokersChanged := full || !slices.EqualFunc(p.acked.brokers, snap.brokers, sameBroker)
	send := func(req kmsg.Request) error {
		if sendHook != nil {
			sendHook(p.s.c.opts.Broker.ID, id, snap.zxid, req)
		}
		return p.send(req)
	}
	if len(lead) > 0 {
		if err := send(p.leaderAndISR(snap, lead, full)); err != nil {
			return err
		}
	}
	if len(stop) > 0 {
		if err := send(p.stopReplica(snap, old, stop)); err != nil {
			return err
		}
	}
	if full || brokersChanged || len(meta) > 0 || len(gone) > 0 {
		if err := send(p.updateMetadata(snap, meta, old, gone)); err != nil {
			return err
		}
	}
	return nil
}

func sameBroker(a, b controller.Broker) bool {
	return a.ID == b.ID && a.Host == b.Host && a.Port == b.Port && slices.Equal(a.Endpoints, b.Endpoints) &&
		(a.Rack == nil) == (b.Rack == nil) && (a.Rack == nil || *a.Rack == *b.Rack)
}

// send delivers one request and turns a refusal into an error.
func (p *peer) send(req kmsg.Request) error {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := p.link.Send(ctx, req)
	if err != nil {
		return fmt.Errorf("%s to broker %d: %w", kmsg.NameForKey(req.Key()), p.broker.ID, err)
	}
	var code int16
	switch r := resp.(type) {
	case *kmsg.LeaderAndISRResponse:
		code = r.ErrorCode
	case *kmsg.StopReplicaResponse:
		code = r.ErrorCode
	case *kmsg.UpdateMetadataResponse:
		code = r.ErrorCode
	default:
		return fmt.Errorf("%s to broker %d: unexpected response %T", kmsg.NameForKey(req.Key()), p.broker.ID, resp)
	}
	if err := kerr.ErrorForCode(code); err != nil {
		// Per-partition refusals (a newer state held) need no retry; a
		// stale epoch does: the broker restarted or this term is over,
		// and an update of the peers follows.
		return fmt.Errorf("%s to broker %d: %w", kmsg.NameForKey(req.Key()), p.broker.ID, err)
	}
	return nil
}

// byTopic groups partitions by topic, in a stable order.
func byTopic(keys []topicPart) (topics []string, parts map[string][]int32) {
	parts = map[string][]int32{}
	for _, k := range keys {
		parts[k.topic] = append(parts[k.topic], k.part)
	}
	topics = slices.Sorted(maps.Keys(parts))
	for _, t := range topics {
		slices.Sort(parts[t])
	}
	return topics, parts
}

func (p *peer) leaderAndISR(snap *snapshot, keys []topicPart, full bool) *kmsg.LeaderAndISRRequest {
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.Version = req.MaxVersion()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = snap.ctrlID, snap.ctrlEpoch, p.epoch
	if full {
		req.Type = 1 // KIP-516: every partition the broker hosts
	}
	leaders := map[int32]bool{}
	topics, parts := byTopic(keys)
	for _, t := range topics {
		ts := kmsg.NewLeaderAndISRRequestTopicState()
		ts.Topic = t
		for _, i := range parts[t] {
			r := snap.parts[topicPart{t, i}]
			ts.TopicID = r.topicID // one id per name in a snapshot
			ps := kmsg.NewLeaderAndISRRequestTopicPartition()
			ps.Partition, ps.ControllerEpoch = i, snap.ctrlEpoch
			ps.Leader, ps.LeaderEpoch, ps.ISR, ps.ZKVersion = r.p.Leader, r.p.LeaderEpoch, r.p.ISR, r.p.PartitionEpoch
			ps.Replicas = r.p.Replicas
			ps.IsNew = p.acked == nil || p.acked.parts[topicPart{t, i}].p.Replicas == nil
			ts.PartitionStates = append(ts.PartitionStates, ps)
			if r.p.Leader >= 0 {
				leaders[r.p.Leader] = true
			}
		}
		req.TopicStates = append(req.TopicStates, ts)
	}
	for _, b := range snap.brokers {
		if leaders[b.ID] {
			l := kmsg.NewLeaderAndISRRequestLiveLeader()
			l.BrokerID, l.Host, l.Port = b.ID, b.Host, b.Port
			if h, port, ok := b.Endpoint(p.s.c.opts.InterBrokerListener); ok && p.s.c.opts.InterBrokerListener != "" {
				l.Host, l.Port = h, port
			}
			req.LiveLeaders = append(req.LiveLeaders, l)
		}
	}
	return req
}

func (p *peer) stopReplica(snap *snapshot, old map[topicPart]partRec, keys []topicPart) *kmsg.StopReplicaRequest {
	req := kmsg.NewPtrStopReplicaRequest()
	req.Version = req.MaxVersion()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = snap.ctrlID, snap.ctrlEpoch, p.epoch
	topics, parts := byTopic(keys)
	for _, t := range topics {
		rt := kmsg.NewStopReplicaRequestTopic()
		rt.Topic = t
		for _, i := range parts[t] {
			st := kmsg.NewStopReplicaRequestTopicPartitionState()
			st.Partition, st.Delete = i, true
			if r, ok := snap.parts[topicPart{t, i}]; ok {
				st.LeaderEpoch = r.p.LeaderEpoch // moved away
			} else {
				st.LeaderEpoch = epochDuringDelete // the topic is deleted
			}
			rt.PartitionStates = append(rt.PartitionStates, st)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func (p *peer) updateMetadata(snap *snapshot, changed []topicPart, old map[topicPart]partRec, gone []topicPart) *kmsg.UpdateMetadataRequest {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.Version = req.MaxVersion()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = snap.ctrlID, snap.ctrlEpoch, p.epoch
	for _, b := range snap.brokers {
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID, lb.Host, lb.Port, lb.Rack = b.ID, b.Host, b.Port, b.Rack
		for _, e := range brokerEndpoints(b) {
			ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
			ep.Host, ep.Port, ep.ListenerName, ep.SecurityProtocol = e.Host, e.Port, e.Listener, e.SecurityProtocol
			lb.Endpoints = append(lb.Endpoints, ep)
		}
		req.LiveBrokers = append(req.LiveBrokers, lb)
	}
	// Partitions of a topic that was deleted and created again under the
	// same name are not sent as deleted: the new topic id replaces the
	// old topic whole on the receiver.
	ids := map[string][16]byte{}
	for k, r := range snap.parts {
		ids[k.topic] = r.topicID
	}
	gone = slices.DeleteFunc(slices.Clone(gone), func(k topicPart) bool {
		_, recreated := ids[k.topic]
		return recreated
	})
	topics, parts := byTopic(append(slices.Clone(changed), gone...))
	for _, t := range topics {
		ts := kmsg.NewUpdateMetadataRequestTopicState()
		ts.Topic = t
		for _, i := range parts[t] {
			k := topicPart{t, i}
			ps := kmsg.NewUpdateMetadataRequestTopicPartition()
			ps.Partition, ps.ControllerEpoch = i, snap.ctrlEpoch
			if r, ok := snap.parts[k]; ok {
				ps.Leader, ps.LeaderEpoch, ps.ISR, ps.ZKVersion = r.p.Leader, r.p.LeaderEpoch, r.p.ISR, r.p.PartitionEpoch
				ps.Replicas = r.p.Replicas
				ps.OfflineReplicas = offline(r.p.Replicas, snap.brokers)
			} else {
				o := old[k]
				ps.Leader, ps.LeaderEpoch = leaderDuringDelete, epochDuringDelete
				ps.ISR, ps.Replicas, ps.ZKVersion = o.p.ISR, o.p.Replicas, o.p.PartitionEpoch
			}
			ts.PartitionStates = append(ts.PartitionStates, ps)
		}
		if id, ok := ids[t]; ok {
			ts.TopicID = id
		} else {
			ts.TopicID = old[topicPart{t, parts[t][0]}].topicID
		}
		req.TopicStates = append(req.TopicStates, ts)
	}
	return req
}

// offline lists the replicas that are not live brokers.
func offline(replicas []int32, live []controller.Broker) []int32 {
	var out []int32
	for _, r := range replicas {
		if !slices.ContainsFunc(live, func(b controller.Broker) bool { return b.ID == r }) {
			out = append(out, r)
		}
	}
	return out
}
