package broker

// Fetch, v4-16.
//
// Consumers read below the high watermark (read_uncommitted) or the last
// stable offset (read_committed, with the aborted transactions of what
// they read: fetch_txn.go); followers (replica id >= 0) read to the log end, and
// their fetch offsets tell the leader their log end (replica/leader.go).
// A replica id is believed only for a replica of the partition and, in a
// cluster, at v15+ with that follower's broker epoch (KIP-903); anything
// else is refused before it reads or records (checkReplicaFetch,
// interbroker.go).
// Long poll: the answer goes out as soon as MinBytes are available or
// MaxWait passes. The first batch of the first partition with data is
// returned whole even when it exceeds the limits (KIP-74). Incremental
// fetch sessions per KIP-227 (fetch_session.go). Topic ids from v13
// (KIP-516); CurrentLeader/NodeEndpoints (KIP-951) from v12/v16. Record
// bytes go from the segment file to the socket with one pread and one
// writev per MiB, or with sendfile (socket.sendfile.enable; network/sendfile.go).
// From v11 consumers give their rack and may fetch from followers
// (KIP-392, replica/select.go): the leader names a
// PreferredReadReplica, a follower serves up to its high watermark.
// Consumers' offsets below the local log start of a tiered partition are
// read from the bucket (remotelog/fetch.go); a replica's get
// OFFSET_MOVED_TO_TIERED_STORAGE when the remote log holds them, as from
// Kafka's leader (replica/fetcher_tier.go, remotelog/follower.go). The LogStartOffset of a tiered
// partition is the remote log start, below the local one, as Kafka's
// UnifiedLog reports it.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/network"
	"strata/broker/plog"
	"strata/broker/replica"
	"strata/controller"
	"strata/tier"
)

func init() { register(1, 4, 16, nil) } // served by handleFetchSpliced

// fetchTarget is one partition to evaluate for a fetch response.
type fetchTarget struct {
	key         tp
	topicID     [16]byte
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32
	logStart    int64     // a replica's log start offset; -1 unknown
	sess        *sessPart // nil for sessionless fetches
	// refuse is the error a replica fetch gets for this partition before
	// anything is read or recorded (checkReplicaFetch, interbroker.go).
	refuse int16
}

type fetchResult struct {
	t       *fetchTarget
	p       *partition // the partition evaluated; nil when the fetch found none
	code    int16
	hw, lso int64
	start   int64
	slice   plog.FileSlice

	remote      bool        // to be read from the bucket (remotelog/fetch.go), at most remoteLimit bytes
	remoteLimit int         // bytes
	records     tier.Pinned // records read from the bucket, held until the response is written

	// committed: a consumer's read_committed fetch, which reads below
	// the last stable offset and is sent the aborted transactions of
	// what it reads (fetch_txn.go).
	committed bool
	aborted   []plog.AbortedTxn

	preferred  int32 // KIP-392 preferred read replica; -1 none
	asFollower bool  // a consumer fetch served by this follower
	throttled  bool  // a replica fetch under the leader's replication throttle
}

func (s *Server) handleFetchSpliced(cc *clientConn, req *kmsg.FetchRequest) (network.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	md := s.ctrl.Metadata()
	replicaID := req.ReplicaID
	if req.Version >= 15 {
		replicaID = req.ReplicaState.ID
	}
	follower := replicaID >= 0
	// KIP-392: consumers of v11+ carry a rack and may read from followers.
	consumer := consumerFetch{fromFollower: !follower && req.Version >= 11, now: time.Now()}
	if consumer.fromFollower {
		consumer.rack = req.Rack
	}

	// Session handling.
	var (
		sess        *fetchSession
		incremental bool
		targets     []*fetchTarget
	)
	reqTargets := func() []*fetchTarget {
		var out []*fetchTarget
		for _, rt := range req.Topics {
			name := rt.Topic
			if req.Version >= 13 {
				name = md.TopicIDs[rt.TopicID]
			}
			for _, rp := range rt.Partitions {
				out = append(out, &fetchTarget{
					key: tp{name, rp.Partition}, topicID: rt.TopicID, fetchOffset: rp.FetchOffset,
					maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch, logStart: rp.LogStartOffset,
				})
			}
		}
		return out
	}
	switch {
	case req.Version < 7 || req.SessionEpoch == -1:
		if req.SessionID != 0 {
			s.sessions.remove(req.SessionID)
		}
		targets = reqTargets()
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			s.sessions.remove(req.SessionID)
		}
		targets = reqTargets()
		if sess = s.sessions.create(); sess != nil {
			sess.mu.Lock()
			defer sess.mu.Unlock()
			for _, t := range targets {
				sess.upsert(sessPart{key: t.key, topicID: t.topicID, fetchOffset: t.fetchOffset, maxBytes: t.maxBytes, leaderEpoch: t.leaderEpoch})
				t.sess = sess.parts[t.key]
			}
			resp.SessionID = sess.id
		}
	default:
		sess = s.sessions.get(req.SessionID)
		if sess == nil {
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return network.Response{Msg: resp}, nil
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if sess.epoch != req.SessionEpoch {
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			return network.Response{Msg: resp}, nil
		}
		incremental = true
		for _, t := range reqTargets() {
			sess.upsert(sessPart{key: t.key, topicID: t.topicID, fetchOffset: t.fetchOffset, maxBytes: t.maxBytes, leaderEpoch: t.leaderEpoch})
		}
		for _, ft := range req.ForgottenTopics {
			name := ft.Topic
			if req.Version >= 13 {
				name = md.TopicIDs[ft.TopicID]
			}
			for _, p := range ft.Partitions {
				sess.forget(tp{name, p})
			}
		}
		for _, sp := range sess.order {
			targets = append(targets, &fetchTarget{key: sp.key, topicID: sp.topicID, fetchOffset: sp.fetchOffset,
				maxBytes: sp.maxBytes, leaderEpoch: sp.leaderEpoch, logStart: -1, sess: sp})
		}
		resp.SessionID = sess.id
		sess.epoch++
		if sess.epoch < 0 {
			sess.epoch = 1
		}
	}

	if follower {
		s.checkReplicaFetch(cc, req, replicaID, md, targets) // interbroker.go
		s.recordFollowerFetches(replicaID, targets)
	} else {
		s.checkConsumerFetch(cc, targets) // authz.go
	}

	maxBytes := req.MaxBytes
	if limit := s.fetchMaxBytes(); maxBytes <= 0 || maxBytes > limit {
		maxBytes = limit
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if s.maxFetchWait > 0 && wait > s.maxFetchWait {
		wait = s.maxFetchWait
	}
	deadline := time.Now().Add(wait)

	var lt *replica.LeaderThrottle
	if follower {
		lt = s.replicas.LeaderThrottleFor(md, replicaID)
	}
	var (
		results []fetchResult
		wakeCh  chan struct{}
	)
	for {
		results = results[:0]
		total := int64(0)
		for _, t := range targets {
			r := s.fetchOne(md, t, follower, lt, consumer, req.IsolationLevel, maxBytes-int32(min(total, int64(maxBytes))), total == 0)
			total += r.slice.Len
			results = append(results, r)
		}
		if total >= int64(req.MinBytes) || wait <= 0 || time.Until(deadline) <= 0 || hasErrorOrPreferred(results) ||
			follower && s.followersNeedHW(replicaID, targets) {
			break
		}
		if wakeCh == nil {
			wakeCh = make(chan struct{}, 1)
			for _, t := range targets {
				if p := s.partition(t.key.topic, t.key.part); p != nil {
					p.AddWaiter(wakeCh)
					defer p.RemoveWaiter(wakeCh)
				}
			}
			continue // re-check: data may have arrived before we registered
		}
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-wakeCh:
		case <-timer.C:
		case <-s.ctx.Done():
		}
		timer.Stop()
	}

	s.fetchRemote(results)
	s.boundRemoteCommitted(results) // fetch_txn.go

	// Build the response. Remote records are held until it is written.
	out := network.Response{Msg: resp}
	for i := range results {
		if results[i].records.Len > 0 {
			out.Release = append(out.Release, results[i].records.Release)
		}
	}
	topicIdx := map[string]int{}
	var leaderHint map[int32]bool
	for i := range results {
		r := &results[i]
		if p := r.p; p != nil && r.code == 0 && (follower || !r.remote) { // a remote read set the remote log start
			// The log start of a tiered partition lies below its local
			// log, as Kafka's UnifiedLog reports it; followers follow it
			// (followLogStart).
			start := s.globalLogStart(p)
			if follower {
				p.RecordSentHW(replicaID, r.hw) // sent now, or in the session already
				r.start = start
			} else if start >= 0 { // not before the remote index is refreshed
				r.start = start
			}
		}
		if sp := r.t.sess; sp != nil {
			changed := r.slice.Len > 0 || r.records.Len > 0 || r.code != 0 || r.preferred >= 0 || sp.hw != r.hw || sp.lso != r.lso || sp.logStart != r.start
			if r.code == 0 {
				sp.hw, sp.lso, sp.logStart = r.hw, r.lso, r.start
			}
			if incremental && !changed {
				continue
			}
		}
		ti, ok := topicIdx[r.t.key.topic]
		if !ok {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = r.t.key.topic
			rt.TopicID = r.t.topicID
			resp.Topics = append(resp.Topics, rt)
			ti = len(resp.Topics) - 1
			topicIdx[r.t.key.topic] = ti
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = r.t.key.part
		rp.ErrorCode = r.code
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = r.hw, r.lso, r.start
		rp.PreferredReadReplica = r.preferred
		if r.committed && r.code == 0 {
			rp.AbortedTransactions = abortedTxnsResponse(r.aborted) // empty, not null, as Kafka's
		}
		if fetchFailed(r.code) {
			s.metrics.fetchErrors.Inc()
		}
		switch {
		case r.preferred >= 0:
			s.metrics.preferredReadReplica.Inc()
		case r.asFollower && r.code == 0:
			s.metrics.fetchFromFollower.Inc()
		}
		if r.code == kerr.NotLeaderForPartition.Code || r.code == kerr.FencedLeaderEpoch.Code {
			if t := md.Topics[r.t.key.topic]; t != nil && int(r.t.key.part) < len(t.Partitions) {
				pm := t.Partitions[r.t.key.part]
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = pm.Leader, pm.LeaderEpoch
				if leaderHint == nil {
					leaderHint = map[int32]bool{}
				}
				leaderHint[pm.Leader] = true
			}
		}
		rp.RecordBatches = []byte{} // empty, not null: librdkafka refuses a null records field
		sent := s.metrics.bytesOut
		if follower {
			sent = s.metrics.replicationBytesOut
		}
		if r.records.Len > 0 {
			m := cc.nc.NextMarker()
			rp.RecordBatches = m[:]
			out.Splices = append(out.Splices, network.SpliceRef{Marker: m, Mem: r.records.Parts, MemLen: r.records.Len})
			sent.Add(float64(r.records.Len))
		} else if r.slice.Len > 0 {
			m := cc.nc.NextMarker()
			rp.RecordBatches = m[:]
			out.Splices = append(out.Splices, network.SpliceRef{Marker: m, Slice: r.slice})
			sent.Add(float64(r.slice.Len))
			if r.throttled {
				lt.Sent(r.slice.Len)
			}
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
	}
	if req.Version >= 16 && len(leaderHint) > 0 {
		for _, b := range md.Brokers {
			if host, port, ok := cc.endpoint(b); ok && leaderHint[b.ID] {
				ne := kmsg.NewFetchResponseBroker()
				ne.NodeID, ne.Host, ne.Port, ne.Rack = b.ID, host, port, b.Rack
				resp.Brokers = append(resp.Brokers, ne)
			}
		}
	}
	return out, nil
}

// hasErrorOrPreferred reports a result to answer at once: an error, a
// preferred read replica (as Kafka, no long poll then), or a remote read.
func hasErrorOrPreferred(rs []fetchResult) bool {
	for _, r := range rs {
		if r.code != 0 || r.preferred >= 0 || r.remote {
			return true
		}
	}
	return false
}

// consumerFetch is what a consumer's fetch says about fetching from
// followers (KIP-392).
type consumerFetch struct {
	fromFollower bool   // v11+: a follower may serve it
	rack         string // the client's rack; "" none
	now          time.Time
}

// fetchOne evaluates one partition: errors, watermarks and the slice of
// whole batches to send.
func (s *Server) fetchOne(md *controller.Metadata, t *fetchTarget, follower bool, lt *replica.LeaderThrottle, consumer consumerFetch, isolation int8, budget int32, first bool) fetchResult {
	r := fetchResult{t: t, hw: -1, lso: -1, start: -1, preferred: -1}
	topic := md.Topics[t.key.topic]
	switch {
	case t.key.topic == "":
		r.code = kerr.UnknownTopicID.Code
		return r
	case t.refuse != 0: // before the topic's existence and size, which it must not tell
		r.code = t.refuse
		return r
	case topic == nil || t.key.part < 0 || int(t.key.part) >= len(topic.Partitions):
		r.code = kerr.UnknownTopicOrPartition.Code
		return r
	}
	p := s.partition(t.key.topic, t.key.part)
	if p == nil {
		r.code = kerr.NotLeaderForPartition.Code
		return r
	}
	if s.offline(p) { // logdir.go
		r.code = kerr.KafkaStorageError.Code
		return r
	}
	r.p = p
	if code := checkLeaderEpoch(t.leaderEpoch, p.LeaderEpoch()); code != 0 {
		r.code = code
		return r
	}
	leader := s.isLeader(p)
	if !leader && !consumer.fromFollower { // replicas and old consumers fetch from the leader
		r.code = kerr.NotLeaderForPartition.Code
		return r
	}
	if leader && p.Restoring.Load() {
		r.code = kerr.LeaderNotAvailable.Code // its log end is not known yet (remotelog/restore.go)
		return r
	}
	hw := p.HW()
	r.hw, r.lso, r.start = hw, p.Log().LastStableOffset(hw), p.Log().LogStartOffset()
	r.committed = !follower && isolation == 1
	r.asFollower = !leader
	if leader && consumer.rack != "" {
		if id := s.replicas.PreferredReadReplica(md, p, consumer.rack, t.fetchOffset, consumer.now); id >= 0 {
			r.preferred = id
			return r
		}
	}
	upTo := hw
	if r.committed {
		upTo = r.lso
	}
	if follower {
		upTo = p.Log().LogEndOffset()
		if lt.Applies(topic, t.key.part) {
			r.throttled = true
			if lt.Hold() {
				return r // over leader.replication.throttled.rate: no records for now
			}
		}
	}
	if t.fetchOffset == upTo || budget <= 0 && !first {
		return r
	}
	limit := int(min(t.maxBytes, budget))
	if r.throttled {
		limit = lt.Limit(limit)
	}
	var (
		sl    plog.FileSlice
		upper int64 // read_committed: above every offset of sl
		err   error
	)
	if r.committed {
		sl, upper, err = p.Log().ReadCommittedForFetch(t.fetchOffset, upTo, max(limit, 0), first)
	} else {
		sl, err = p.Log().ReadForFetch(t.fetchOffset, upTo, max(limit, 0), first)
	}
	if err != nil {
		r.code = errCode(err)
		if r.code == kerr.OffsetOutOfRange.Code && t.fetchOffset > hw && t.fetchOffset <= p.Log().LogEndOffset() {
			r.code = 0 // between HW and LEO: nothing yet, not an error
		}
		if r.code == kerr.OffsetOutOfRange.Code && t.fetchOffset >= 0 && t.fetchOffset < r.start && s.remoteNotReady(p) {
			r.code = kerr.ReplicaNotAvailable.Code // below the local log start before the index is refreshed: retried
		}
		if r.code == kerr.OffsetOutOfRange.Code && follower && s.movedToTier(p, t.fetchOffset) {
			r.code = kerr.OffsetMovedToTieredStorage.Code // the follower rebuilds from our local tail (replica/fetcher_tier.go, remotelog/follower.go)
		}
		if r.code == kerr.OffsetOutOfRange.Code && !follower && t.fetchOffset >= 0 && t.fetchOffset < r.start && s.remoteReadable(p) {
			if start, ok := s.remoteLogStart(p); ok && t.fetchOffset >= start {
				r.code, r.start = 0, start
				// read after the loop (remotelog/fetch.go); read_committed
				// only below the last stable offset (fetch_txn.go)
				r.remote, r.remoteLimit = !r.committed || t.fetchOffset < upTo, max(limit, 1)
			}
		}
		return r
	}
	if r.committed && sl.Len > 0 {
		// the local log's aborted transactions (fetch_txn.go,
		// remotelog/txn.go)
		if r.aborted, r.code = s.abortedTransactions(p, t.fetchOffset, upper); r.code != 0 {
			return r
		}
	}
	r.slice = sl
	return r
}

// checkLeaderEpoch fences a request that names a leader epoch (-1 = none).
func checkLeaderEpoch(requested, current int32) int16 {
	switch {
	case requested < 0 || requested == current:
		return 0
	case requested < current:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}

// recordFollowerFetches updates the leader's view of a follower from its
// fetch offsets and starts any ISR expansion it earns.
func (s *Server) recordFollowerFetches(replicaID int32, targets []*fetchTarget) {
	now := time.Now()
	for _, t := range targets {
		if t.refuse != 0 {
			continue
		}
		p := s.partition(t.key.topic, t.key.part)
		if p == nil || !s.isLeader(p) || checkLeaderEpoch(t.leaderEpoch, p.LeaderEpoch()) != 0 {
			continue
		}
		if t.logStart >= 0 {
			p.RecordFollowerLogStart(replicaID, t.logStart)
		}
		s.replicas.RecordFollowerFetch(p, replicaID, t.fetchOffset, now)
	}
}

// followersNeedHW reports whether any partition of a follower's fetch has
// a high watermark the follower has not been sent.
func (s *Server) followersNeedHW(replicaID int32, targets []*fetchTarget) bool {
	for _, t := range targets {
		if p := s.partition(t.key.topic, t.key.part); p != nil && t.refuse == 0 && p.FollowerNeedsHW(replicaID) {
			return true
		}
	}
	return false
}
