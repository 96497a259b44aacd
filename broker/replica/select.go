package replica

// Fetching from followers (KIP-392).
//
// A consumer's Fetch from v11 carries its rack (client.rack). When
// replica.selector.class is Kafka's RackAwareReplicaSelector, the leader
// answers such a fetch with PreferredReadReplica, and no records, when an
// in-sync follower in the consumer's rack has the fetch offset (its log
// start <= offset <= its log end) and no replica in that rack is the
// leader; among several, the one with the highest log end, then the one
// caught up most recently. The consumer then fetches from that follower,
// which serves up to its own high watermark (the leader's, as of its last
// fetch). As in Kafka's ReplicaManager:
//
//   - only the leader picks a preferred replica, and never for a replica's
//     own fetch (replica id >= 0);
//   - a follower serves consumer fetches of v11 and later; older consumer
//     fetches and every replica fetch to a non-leader get
//     NOT_LEADER_OR_FOLLOWER;
//   - a fetch answered with a preferred replica is answered at once (no
//     long poll);
//   - a follower's fetch waiting for data is answered as soon as the
//     leader's high watermark passes the one last sent to that follower,
//     so that followers learn it without waiting replica.fetch.wait.max.ms
//     and serve consumers with little delay;
//   - an unset replica.selector.class (or Kafka's LeaderSelector) keeps
//     every consumer on the leader.

import (
	"time"

	"strata/broker/config"
	"strata/controller"
)

// replicaView is what the selector knows of one replica (Kafka's
// ReplicaView).
type replicaView struct {
	id            int32
	rack          *string
	logEnd        int64
	sinceCaughtUp time.Duration
}

// selectRackAware is Kafka's RackAwareReplicaSelector: with no client rack,
// or no replica in it, or the leader in it, the leader; otherwise the
// replica of that rack with the highest log end, then the shortest time
// since it caught up, then the highest id. replicas includes the leader.
func selectRackAware(clientRack string, leader replicaView, replicas []replicaView) replicaView {
	if clientRack == "" {
		return leader
	}
	var best *replicaView
	for i := range replicas {
		r := &replicas[i]
		if r.rack == nil || *r.rack != clientRack {
			continue
		}
		if r.id == leader.id {
			return leader
		}
		if best == nil || r.logEnd > best.logEnd ||
			r.logEnd == best.logEnd && (r.sinceCaughtUp < best.sinceCaughtUp ||
				r.sinceCaughtUp == best.sinceCaughtUp && r.id > best.id) {
			best = r
		}
	}
	if best == nil {
		return leader
	}
	return *best
}

// PreferredReadReplica returns the replica a consumer in clientRack should
// fetch fetchOffset of p from, when the selector picks one other than this
// leader; -1 otherwise.
func (m *Manager) PreferredReadReplica(md *controller.Metadata, p *Partition, clientRack string, fetchOffset int64, now time.Time) int32 {
	if m.cfg.ReplicaSelectorClass != config.RackAwareReplicaSelector || clientRack == "" {
		return -1
	}
	alive := map[int32]*string{}
	for _, b := range md.Brokers {
		alive[b.ID] = b.Rack
	}
	leaderRack, ok := alive[m.cfg.ID]
	if !ok {
		leaderRack = m.cfg.Rack
	}
	leader := replicaView{id: m.cfg.ID, rack: leaderRack, logEnd: p.log.LogEndOffset()}
	views := []replicaView{leader}
	r := &p.rs
	r.mu.Lock()
	if !r.leader {
		r.mu.Unlock()
		return -1
	}
	for _, id := range r.isr {
		f := r.followers[id]
		rack, up := alive[id]
		// As Kafka: only in-sync followers that have the offset, and
		// only brokers with a known endpoint.
		if id == r.self || f == nil || !up || f.leo < fetchOffset || f.logStart > fetchOffset {
			continue
		}
		views = append(views, replicaView{id: id, rack: rack, logEnd: f.leo, sinceCaughtUp: now.Sub(f.lastCaughtUp)})
	}
	r.mu.Unlock()
	if got := selectRackAware(clientRack, leader, views); got.id != leader.id {
		return got.id
	}
	return -1
}

// RecordFollowerLogStart keeps the log start offset a follower sent in its
// fetch, for the selector's "has the offset" rule; -1 (unknown) passes it.
func (p *Partition) RecordFollowerLogStart(id int32, logStart int64) {
	r := &p.rs
	r.mu.Lock()
	if f := r.followers[id]; r.leader && f != nil {
		f.logStart = logStart
	}
	r.mu.Unlock()
}

// RecordSentHW notes the high watermark sent to follower id.
func (p *Partition) RecordSentHW(id int32, hw int64) {
	r := &p.rs
	r.mu.Lock()
	if f := r.followers[id]; r.leader && f != nil {
		f.lastSentHW = hw
	}
	r.mu.Unlock()
}

// FollowerNeedsHW reports whether follower id was last sent a high
// watermark below p's (Kafka's DelayedFetch "case H").
func (p *Partition) FollowerNeedsHW(id int32) bool {
	hw := p.hw.Load()
	r := &p.rs
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.followers[id]
	return r.leader && f != nil && f.lastSentHW < hw
}
