package broker

// Delayed produce (Kafka's DelayedProduce): an acks=-1 request is answered
// once the high watermark passes each of its batches, with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when it does so while the ISR is below
// min.insync.replicas, NOT_LEADER_OR_FOLLOWER when leadership moves away,
// and REQUEST_TIMED_OUT after the request's timeout (counted from the
// append). Only the producing connection's response waits, in that
// connection's writer goroutine (conn.go); its reader goes on appending
// the producer's next requests.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// produceWait is one appended acks=-1 partition awaiting replication.
type produceWait struct {
	p           *partition
	required    int64 // the high watermark that covers the batch
	topic, part int   // indexes into the response
}

func (s *Server) awaitReplication(resp *kmsg.ProduceResponse, waits []produceWait, until time.Time,
	setErr func(*kmsg.ProduceResponseTopicPartition, int16, string)) {
	if len(waits) == 0 {
		return
	}
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	ch := make(chan struct{}, 1)
	for _, w := range waits {
		w.p.addWaiter(ch)
		defer w.p.removeWaiter(ch)
	}
	timedOut := false
	for _, w := range waits {
		sp := &resp.Topics[w.topic].Partitions[w.part]
		for {
			if code, done := s.replicationDone(w); done {
				if code != 0 {
					setErr(sp, code, "")
				}
				break
			}
			if timedOut {
				setErr(sp, kerr.RequestTimedOut.Code, "")
				break
			}
			select {
			case <-ch:
			case <-deadline.C:
				timedOut = true
			case <-s.ctx.Done():
				setErr(sp, kerr.NotLeaderForPartition.Code, "")
			}
			if s.ctx.Err() != nil {
				break
			}
		}
	}
}

// replicationDone tells whether w can be answered, and with which error.
func (s *Server) replicationDone(w produceWait) (code int16, done bool) {
	if s.partition(w.p.topic, w.p.index) != w.p || !s.isLeader(w.p) {
		return kerr.NotLeaderForPartition.Code, true
	}
	if w.p.hw.Load() < w.required {
		return 0, false
	}
	if w.p.isrSize() < int(w.p.minISR.Load()) {
		return kerr.NotEnoughReplicasAfterAppend.Code, true
	}
	return 0, true
}

// addCurrentLeaders fills KIP-951's CurrentLeader and NodeEndpoints for
// partitions answered NOT_LEADER_OR_FOLLOWER.
func (s *Server) addCurrentLeaders(md *controller.Metadata, resp *kmsg.ProduceResponse) {
	hint := map[int32]bool{}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		t := md.Topics[rt.Topic]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if rp.ErrorCode != kerr.NotLeaderForPartition.Code || t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				continue
			}
			pm := t.Partitions[rp.Partition]
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = pm.Leader, pm.LeaderEpoch
			if pm.Leader >= 0 {
				hint[pm.Leader] = true
			}
		}
	}
	for _, b := range md.Brokers {
		if hint[b.ID] {
			nb := kmsg.NewProduceResponseBroker()
			nb.NodeID, nb.Host, nb.Port, nb.Rack = b.ID, b.Host, b.Port, b.Rack
			resp.Brokers = append(resp.Brokers, nb)
		}
	}
}
