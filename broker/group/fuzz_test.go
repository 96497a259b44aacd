package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
)

// FuzzLoadRecords feeds arbitrary bytes to the partition loader as
// record batches (transactional ones and markers among the seeds), and as
// a key/value pair inside a valid batch, plain and transactional: nothing
// may panic, and a loaded group must be usable.
func FuzzLoadRecords(f *testing.F) {
	g := newClassicGroup("g", 0)
	g.generation, g.protocolName, g.leaderID = 1, kmsg.StringPtr("range"), "m"
	pt := "consumer"
	g.protocolType = &pt
	g.add(&member{id: "m", protocols: []protocol{{"range", consumerMeta("t")}}, sessionTimeoutMs: 1000})
	f.Add([]byte{0, 2, 0, 1, 'g'}, classicGroupValue(g, nil), []byte(nil))
	f.Add(offsetCommitKey("g", TopicPartition{"t", 1}), offsetCommitValue(OffsetEntry{Offset: 5, LeaderEpoch: -1, ExpireTimestamp: -1}), []byte(nil))
	f.Add([]byte{0, 1}, []byte{0, 3, 1}, encodeBatch([]Record{{Key: []byte{0, 9}}}, time.Unix(0, 0)))
	// Transactional batches and markers (txn_offsets.go).
	txnRec := []Record{{Key: offsetCommitKey("g", TopicPartition{"t", 1}), Value: offsetCommitValue(OffsetEntry{Offset: 7, LeaderEpoch: -1, ExpireTimestamp: -1})}}
	txnBatch := encodeProducerBatch(txnRec, time.Unix(0, 0), batchProducer{ID: 3, Epoch: 1, Seq: 0, Transactional: true})
	f.Add([]byte(nil), []byte(nil), append(txnBatch, plog.ControlBatch(3, 1, plog.EndTxnMarker{Type: plog.ControlCommit}, 0)...))
	f.Add([]byte(nil), []byte(nil), append(txnBatch, plog.ControlBatch(3, 1, plog.EndTxnMarker{Type: plog.ControlAbort}, 0)...))
	f.Add(txnRec[0].Key, []byte(nil), txnBatch)
	f.Fuzz(func(t *testing.T, key, value, raw []byte) {
		ls := newLoadState(&shard{c: &Coordinator{}})
		ls.applyBatches(raw)
		decodeBatches(raw, ls.apply)
		decodeBatches(encodeBatch([]Record{{Key: key, Value: value}}, time.Unix(0, 0)), ls.apply)
		ls.applyBatches(encodeProducerBatch([]Record{{Key: key, Value: value}}, time.Unix(0, 0), batchProducer{ID: 3, Epoch: 1, Transactional: true}))
		ls.endTxn(3, true)
		for pid := range ls.pending {
			ls.endTxn(pid, len(raw)%2 == 0)
		}
		if len(ls.pending) != 0 {
			t.Fatalf("pending offsets left after every marker: %v", ls.pending)
		}
		for id, gv := range ls.groups {
			g := groupFromValue(id, gv)
			g.selectProtocol()
			g.currentMemberMetadata()
			classicGroupValue(g, nil)
		}
	})
}
