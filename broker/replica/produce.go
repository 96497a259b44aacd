package replica

// Delayed produce (Kafka's DelayedProduce): an acks=-1 request is answered
// once the high watermark passes each of its batches, with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when it does so while the ISR is below
// min.insync.replicas, NOT_LEADER_OR_FOLLOWER when leadership moves away,
// and REQUEST_TIMED_OUT after the request's timeout (counted from the
// append). Only the producing connection's response waits, in that
// connection's writer goroutine (network/conn.go); its reader goes
// on appending the producer's next requests.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceWait is one appended acks=-1 partition awaiting replication.
type ProduceWait struct {
	P           *Partition
	Required    int64 // the high watermark that covers the batch
	Topic, Part int   // indexes into the response
}

// AwaitReplication waits until each of waits can be answered, or until,
// and sets the errors of resp's partitions with setErr.
func (m *Manager) AwaitReplication(resp *kmsg.ProduceResponse, waits []ProduceWait, until time.Time,
	setErr func(*kmsg.ProduceResponseTopicPartition, int16, string)) {
	if len(waits) == 0 {
		return
	}
	m.awaiting.Add(1)
	defer m.awaiting.Add(-1)
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	ch := make(chan struct{}, 1)
	for _, w := range waits {
		w.P.AddWaiter(ch)
		defer w.P.RemoveWaiter(ch)
	}
	timedOut := false
	for _, w := range waits {
		sp := &resp.Topics[w.Topic].Partitions[w.Part]
		for {
			if code, done := m.replicationDone(w); done {
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
			case <-m.ctx.Done():
				setErr(sp, kerr.NotLeaderForPartition.Code, "")
			}
			if m.ctx.Err() != nil {
				break
			}
		}
	}
}

// AwaitingReplication is the number of acks=-1 produces waiting for
// replication: a broker shutting down lets them be answered first.
func (m *Manager) AwaitingReplication() int64 { return m.awaiting.Load() }

// replicationDone tells whether w can be answered, and with which error.
func (m *Manager) replicationDone(w ProduceWait) (code int16, done bool) {
	if m.Partition(w.P.topic, w.P.index) != w.P || !m.IsLeader(w.P) {
		return kerr.NotLeaderForPartition.Code, true
	}
	if w.P.hw.Load() < w.Required {
		return 0, false
	}
	if w.P.ISRSize() < int(w.P.minISR.Load()) {
		return kerr.NotEnoughReplicasAfterAppend.Code, true
	}
	return 0, true
}
