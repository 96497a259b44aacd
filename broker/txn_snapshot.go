package broker

// The transaction state in the bucket (tier/txn_snapshot.go), as the
// group offsets are kept (metadata_snapshot.go): every transaction
// coordinator writes the state of the transactional ids of each
// __transaction_state partition it leads when it changed and at least
// every snapshotRefresh, and a partition that loads empty (the disks were
// wiped: scaled to zero and back) takes in the bucket's state of its ids
// before it serves, so that a transactional producer that comes back
// gets its producer id with the epoch bumped (and a zombie of it is
// fenced). A partition loaded while the bucket was another cluster's
// (before strata admin restore adopted its cluster id) takes in the ids
// it lacks once the bucket is this cluster's (Coordinator.Merge); until
// then its state is not written over the bucket's. The snapshot loop
// counts these writes in the time strata admin cluster drain waits for.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"strata/broker/txn"
	"strata/controller"
	"strata/tier"
)

// txnPartitions is the partition count of __transaction_state (1 if it
// does not exist).
func txnPartitions(md *controller.Metadata) int32 {
	if t := md.Topics[txnStateTopic]; t != nil {
		return int32(len(t.Partitions))
	}
	return 1
}

// bucketTxnRecords returns the records of the bucket's transaction state
// of cluster clusterID for the transactional ids of partition idx (of
// nparts): from the partition's own object when it was written with
// nparts partitions, else from all of them.
func (s *Server) bucketTxnRecords(ctx context.Context, idx, nparts int32, clusterID string) ([]txn.Record, error) {
	var snaps []tier.TxnStateSnapshot
	own, err := tier.ReadTxnStatePartition(ctx, s.tier.store, idx)
	switch {
	case err == nil && own.Partitions == nparts:
		snaps = append(snaps, own)
	case err == nil || errors.Is(err, tier.ErrNotFound):
		if snaps, err = tier.ReadTxnStates(ctx, s.tier.store, clusterID); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	var out []txn.Record
	bad := 0
	for _, snap := range snaps {
		if snap.ClusterID != clusterID {
			continue // discarded
		}
		for _, t := range snap.Transactions {
			if txn.PartitionFor(t.TransactionalID, nparts) != idx {
				continue
			}
			r := txn.Record{Key: txn.EncodeKey(t.TransactionalID), Value: t.Value}
			if id, err := txn.CheckRecord(r); err != nil || id != t.TransactionalID {
				bad++
				continue
			}
			out = append(out, r)
		}
	}
	if bad > 0 {
		s.log.Warn("left out transaction states of the bucket's snapshot that do not decode", "partition", idx, "transactional_ids", bad)
	}
	return out, nil
}

// seedTxnState runs before a load replays a __transaction_state
// partition whose log ends at end: an empty one takes in the bucket's
// state of its transactional ids, appended as one batch (so a load cut
// short has all of it or none), when the bucket is this cluster's; the
// load waits (its ids answer COORDINATOR_LOAD_IN_PROGRESS) while the
// bucket cannot be read or the append fails.
func (s *Server) seedTxnState(l txnStateLog, end int64) error {
	if s.tier == nil || end > 0 {
		l.bucketLoaded.Store(true)
		return nil
	}
	return s.seedUntilDone(l.p, txnStateTopic,
		"load the transaction state of an empty __transaction_state partition from the bucket; its transactional ids wait, retrying",
		func() error { return s.trySeedTxn(l) })
}

func (s *Server) trySeedTxn(l txnStateLog) error {
	ctx, cancel := context.WithTimeout(s.ctx, snapshotTimeout)
	defer cancel()
	md := s.ctrl.Metadata()
	if md.ClusterID == "" {
		return errors.New("the cluster id is not known yet")
	}
	owner, err := tier.ReadClusterSnapshot(ctx, s.tier.store)
	switch {
	case errors.Is(err, tier.ErrNotFound):
		l.bucketLoaded.Store(true) // nothing kept
		return nil
	case err != nil:
		return err
	case owner.ClusterID != md.ClusterID:
		return nil // another cluster's: merged once it is this cluster's
	}
	recs, err := s.bucketTxnRecords(ctx, l.p.Index(), txnPartitions(md), md.ClusterID)
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		if _, err := l.Append(txn.EncodeRecords(recs)); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		s.log.Info("loaded transaction state into an empty __transaction_state partition from the bucket's snapshot",
			"partition", l.p.Index(), "transactional_ids", len(recs))
	}
	l.bucketLoaded.Store(true)
	return nil
}

// ledTxnState returns the __transaction_state partitions this broker
// coordinates.
func (h *txnHost) ledTxnState() []txnStateLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]txnStateLog, 0, len(h.led))
	for _, idx := range slices.Sorted(maps.Keys(h.led)) {
		out = append(out, *h.led[idx])
	}
	return out
}

// writeTxnSnapshots writes the transaction state of each loaded
// __transaction_state partition this broker coordinates when it changed
// or the refresh is due, and reports whether all of them are in the
// bucket.
func (s *Server) writeTxnSnapshots(ctx context.Context, st *snapshotState, md *controller.Metadata, now time.Time) bool {
	h := s.txns
	if h == nil {
		return true
	}
	led := h.ledTxnState()
	for o := range st.txns {
		if !slices.ContainsFunc(led, func(l txnStateLog) bool { return l.offsetsLog == o }) {
			delete(st.txns, o)
		}
	}
	ours := st.ownerOK && st.owner == md.ClusterID
	nparts := txnPartitions(md)
	complete := true
	for _, l := range led {
		idx := l.p.Index()
		if !h.coord.Loaded(idx) {
			complete = false
			continue
		}
		if !l.bucketLoaded.Load() {
			if !ours || st.closing || !s.mergeTxnState(ctx, l, md) {
				complete = false
				continue
			}
		}
		recs, loaded := h.coord.PartitionRecords(idx)
		if !loaded {
			complete = false
			continue
		}
		snap := tier.TxnStateSnapshot{ClusterID: md.ClusterID, Partition: idx, Partitions: nparts, LeaderEpoch: l.term.epoch,
			Transactions: []tier.SnapshotTxn{}}
		for _, r := range recs {
			snap.Transactions = append(snap.Transactions, tier.SnapshotTxn{TransactionalID: r.TransactionalID, State: r.State.String(),
				ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, Value: r.Value})
		}
		sum := snapshotSum(snap)
		w := st.txns[l.offsetsLog]
		if w == nil {
			w = &snapshotWritten{}
			st.txns[l.offsetsLog] = w
		}
		if sum == w.sum && !w.refreshDue(now) {
			continue
		}
		if !ours {
			complete = false
			continue
		}
		if !l.leads() {
			// Lost the partition since the state was read: its new
			// leader writes it.
			complete = false
			continue
		}
		snap.WrittenMs = now.UnixMilli()
		if err := tier.WriteTxnState(ctx, s.tier.store, snap); errors.Is(err, tier.ErrStaleTxnState) {
			complete = false
			s.log.Info("transaction state snapshot not written: a later leader of the partition wrote it", "partition", idx, "err", err)
			continue
		} else if err != nil {
			complete = false
			if s.ctx.Err() == nil {
				s.tier.warnings.warn(s.log, "write transaction state snapshot to the bucket; retrying", "partition", idx, "err", err)
			}
			continue
		}
		w.sum, w.at = sum, now
	}
	return complete
}

// mergeTxnState takes into a partition loaded while the bucket was
// another cluster's the bucket's state of the transactional ids it
// lacks, and reports whether it now holds it.
func (s *Server) mergeTxnState(ctx context.Context, l txnStateLog, md *controller.Metadata) bool {
	idx := l.p.Index()
	recs, err := s.bucketTxnRecords(ctx, idx, txnPartitions(md), md.ClusterID)
	if err == nil {
		var n int
		if n, err = s.txns.coord.Merge(idx, recs); err == nil && n > 0 {
			s.log.Info("merged transaction state from the bucket's snapshot into a __transaction_state partition loaded before the bucket was this cluster's",
				"partition", idx, "transactional_ids", n)
		}
	}
	if err != nil {
		if s.ctx.Err() == nil {
			s.tier.warnings.warn(s.log, "merge the bucket's transaction state into a __transaction_state partition; retrying", "partition", idx, "err", err)
		}
		return false
	}
	l.bucketLoaded.Store(true)
	return true
}
