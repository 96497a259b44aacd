package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
)

// TestTxnOffsetCommitHandler calls the TxnOffsetCommit handler in-process
// on a broker with the authorizer on, in a transaction open at its
// coordinator: Kafka's ACL checks, then offsets that
// OffsetFetch with require_stable reports unstable until a COMMIT marker
// is written to __consumer_offsets and handed to the group coordinator.
func TestTxnOffsetCommitHandler(t *testing.T) {
	b := startACLBroker(t, nil)
	ctx := testCtx(t)
	admin := b.as(t, "admin")
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "secret"); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Groups("g1").Topics("orders", "missing").Operations(kadm.OpRead))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").TransactionalIDs("tx1").Operations(kadm.OpWrite))
	// The group's coordinator, loaded (FindCoordinator creates
	// __consumer_offsets).
	if _, err := adm.FetchOffsets(ctx, "g1"); err != nil {
		t.Fatal(err)
	}

	// A transaction of tx1 open at its coordinator: the leader of g1's
	// offsets partition verifies (or adds) the partition with it.
	prod := b.as(t, "admin", kgo.TransactionalID("tx1"), kgo.DefaultProduceTopic("orders"))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d := describeTxn(t, ctx, adm, "tx1")
	pid, epoch := d.ProducerID, d.ProducerEpoch

	alice := &clientConn{env: &envelopeOrigin{principal: "User:alice", host: "127.0.0.1"}}
	txnReq := func(txnID, group string, offsets map[string]int64) *kmsg.TxnOffsetCommitRequest {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.Version = txnOffsetCommitMaxVersion
		r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = txnID, group, pid, epoch, -1
		for _, topic := range []string{"orders", "secret", "missing"} {
			off, ok := offsets[topic]
			if !ok {
				continue
			}
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, off
			if topic == "orders" {
				rp.Partition = 1
			}
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	call := func(r *kmsg.TxnOffsetCommitRequest) map[string]int16 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := handleTxnOffsetCommit(b.Server, alice, r)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int16{}
			loading := false
			for _, rt := range resp.(*kmsg.TxnOffsetCommitResponse).Topics {
				for _, rp := range rt.Partitions {
					out[rt.Topic] = rp.ErrorCode
					loading = loading || rp.ErrorCode == kerr.CoordinatorLoadInProgress.Code || rp.ErrorCode == kerr.NotCoordinator.Code
				}
			}
			if !loading {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("coordinator still loading: %v", out)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	got := call(txnReq("tx2", "g1", map[string]int64{"orders": 5}))
	wantACLCode(t, "TxnOffsetCommit without Write on the transactional id", got["orders"], kerr.TransactionalIDAuthorizationFailed)
	got = call(txnReq("tx1", "g2", map[string]int64{"orders": 5}))
	wantACLCode(t, "TxnOffsetCommit without Read on the group", got["orders"], kerr.GroupAuthorizationFailed)
	got = call(txnReq("tx1", "g1", map[string]int64{"orders": 5, "secret": 6, "missing": 1}))
	wantACLCode(t, "TxnOffsetCommit without Read on the topic", got["secret"], kerr.TopicAuthorizationFailed)
	wantACLCode(t, "TxnOffsetCommit of an unknown topic", got["missing"], kerr.UnknownTopicOrPartition)
	if got["orders"] != 0 {
		t.Fatalf("TxnOffsetCommit orders: %v", kerr.ErrorForCode(got["orders"]))
	}
	// A second commit of the same transaction (the next sequence of the
	// producer in the partition log).
	if got = call(txnReq("tx1", "g1", map[string]int64{"orders": 7})); got["orders"] != 0 {
		t.Fatalf("second TxnOffsetCommit: %v", kerr.ErrorForCode(got["orders"]))
	}

	fetch := func() (int64, int16) {
		t.Helper()
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version, r.Group, r.RequireStable = 7, "g1", true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "orders", []int32{1}
		r.Topics = append(r.Topics, rt)
		resp, err := r.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return -1, resp.ErrorCode
		}
		p := resp.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if off, code := fetch(); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable fetch of a pending offset: %d %v", off, kerr.ErrorForCode(code))
	}
	idx := b.groups.coord.PartitionFor("g1")
	p := b.partition(offsetsTopic, idx)
	if _, open := p.Log().OpenTransaction(pid); !open {
		t.Fatal("no transaction open in __consumer_offsets for the producer")
	}
	// What the marker writer does: the COMMIT marker, then CompleteTxn.
	if _, err := p.Log().AppendControl(pid, epoch, plog.EndTxnMarker{Type: plog.ControlCommit}, p.LeaderEpoch(), 0); err != nil {
		t.Fatal(err)
	}
	p.AdvanceHW(p.Log().LogEndOffset())
	b.groups.coord.CompleteTxn(idx, pid, true)
	if off, code := fetch(); code != 0 || off != 7 {
		t.Fatalf("fetch after the commit marker: %d %v, want 7", off, kerr.ErrorForCode(code))
	}
}
