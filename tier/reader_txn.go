package tier

// The aborted transactions of remote segments, for read_committed
// fetches (Kafka's RemoteLogManager.collectAbortedTransactions).

import (
	"context"
	"errors"
	"slices"

	"strata/broker/plog"
	"strata/index"
)

// SegmentLookup finds the readable remote segment that serves an offset
// (*index.Index).
type SegmentLookup interface {
	SegmentForOffset(tp index.TopicIDPartition, offset int64) (index.SegmentMetadata, error)
}

// LocalTxns is the local log of the partition as AbortedTransactions
// reads it (*plog.Log).
type LocalTxns interface {
	LogStartOffset() int64
	AbortedTransactions(from, upper int64) []plog.AbortedTxn
}

// TxnIndex returns the aborted transactions of a remote segment: its
// .txnindex, read whole (at most MaxIndexObject bytes), checked and
// parsed once and kept in the index cache. A segment whose manifest lists
// it with size 0 (KIP-1058: empty), or does not list it (uploaded before
// transactions were served), has none, and costs no GET.
func (r *Reader) TxnIndex(ctx context.Context, m *index.SegmentMetadata) ([]plog.AbortedTxn, error) {
	v, err := r.indexObject(ctx, m, index.ObjectTransactionIndex, func(b []byte) (any, int64, error) {
		x, err := plog.DecodeTxnIndex(b, m.StartOffset)
		if err == nil {
			for _, t := range x {
				if t.LastOffset > m.EndOffset {
					err = errors.New("an ABORT marker after the segment's end")
				}
			}
		}
		return x, int64(len(b)), err
	})
	if v == nil || err != nil {
		return nil, err
	}
	return v.([]plog.AbortedTxn), nil
}

// mayEndLater reports whether a transaction that began below upper may
// have its marker after the remote segment m, which reaches upper: only
// one open at m's end can, and m's producer snapshot (written at its end,
// cached with the index objects) lists those. Without a snapshot, or one
// that does not read, it may.
func (r *Reader) mayEndLater(ctx context.Context, m *index.SegmentMetadata, upper int64) bool {
	v, err := r.indexObject(ctx, m, index.ObjectProducerSnapshot, func(b []byte) (any, int64, error) {
		x, err := plog.SnapshotOpenTransactions(b)
		return x, int64(len(b)), err
	})
	if err != nil || v == nil {
		return true
	}
	for _, first := range v.(map[int64]int64) {
		if first < upper {
			return true
		}
	}
	return false
}

// AbortedTransactions returns the aborted transactions that overlap
// [from, upper) of a tiered partition whose records lie in the bucket
// (segs) below the local log's start and in the local log from there on:
// those whose ABORT marker is at or after from and whose first offset is
// below upper. A read_committed fetch that returns the batches in
// [from, upper) sends them to the consumer, which drops those
// transactions' records.
//
// The markers at or after from lie in the remote segments from the one
// serving from up to the local log start, then in the local log: a
// transaction's records may be in the bucket and its marker local (or in
// a later remote segment), and a fetch served from the bucket must still
// list it. So this reads the .txnindex of each remote segment from the
// one serving from (TxnIndex: cached, no GET for one without aborted
// transactions), keeping the markers below the local log start, until an
// entry's last stable offset reaches upper (Kafka's rule: no later
// transaction can start below upper), or a segment reaching upper has no
// transaction begun below upper open at its end (its producer snapshot,
// cached: so a fetch of a partition without long transactions reads one
// or two segments' objects, not every remote segment up to the local
// log), or the remote log ends, and then asks the local log for the rest. A marker held both in the bucket and
// locally (the segments overlap) is listed once. A
// fetch at or above the local log start asks only the local log: every
// marker at or after from is local. local may be nil (a remote read
// only).
func (r *Reader) AbortedTransactions(ctx context.Context, segs SegmentLookup, tp index.TopicIDPartition, local LocalTxns, from, upper int64) ([]plog.AbortedTxn, error) {
	if from >= upper {
		return nil, nil
	}
	localStart := int64(-1)
	if local != nil {
		localStart = local.LogStartOffset()
		if from >= localStart {
			return local.AbortedTransactions(from, upper), nil
		}
	}
	var out []plog.AbortedTxn
	for off := from; local == nil || off < localStart; {
		m, err := segs.SegmentForOffset(tp, off)
		if errors.Is(err, index.ErrNotFound) {
			break // the remote log ends here
		}
		if err != nil {
			return nil, err
		}
		if m.EndOffset < off {
			break // not a segment holding off: nothing more to trust
		}
		entries, err := r.TxnIndex(ctx, &m)
		if err != nil {
			return nil, err
		}
		for _, t := range entries {
			if t.LastOffset < off {
				continue // read in the segment before (overlapping uploads)
			}
			if local != nil && t.LastOffset >= localStart {
				break // the local log lists it
			}
			if t.LastOffset >= from && t.FirstOffset < upper {
				out = append(out, t)
			}
			if t.LastStableOffset >= upper {
				return out, nil
			}
		}
		off = m.EndOffset + 1
		if off >= upper && !r.mayEndLater(ctx, &m, upper) {
			if local == nil || off <= localStart {
				return out, nil
			}
			break // the local log lists the markers of m above its start
		}
	}
	if local == nil {
		return out, nil
	}
	// The local log lists the markers at or after its start, none of
	// those above, and perhaps some below it (its first segment may start
	// below the log start that DeleteRecords set): those are skipped if
	// listed already.
	remote := len(out)
	for _, t := range local.AbortedTransactions(from, upper) {
		if t.LastOffset < localStart && slices.ContainsFunc(out[:remote], func(o plog.AbortedTxn) bool { return o.LastOffset == t.LastOffset }) {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}
