package broker

// read_committed fetches (isolation_level 1, Fetch v4+).
//
// A consumer's read_committed fetch reads below the partition's last
// stable offset (plog: the first offset of the oldest transaction not yet
// ended and replicated, or the high watermark), and its answer carries
// the aborted transactions that overlap what it returns, as Kafka's
// collectAbortedTransactions(fetchOffset, upperBoundOffset) finds them in
// the .txnindex files: the client drops the records of those
// transactions. The upper bound is the offset after the last batch
// returned or, when the slice ends in a partial batch, an offset the
// offset index finds just past its end (plog.Log.ReadCommittedForFetch,
// Kafka's fetchUpperBoundOffset); an entry too many is harmless, as the
// client only uses an entry once it reaches a batch of that producer at
// or after the entry's first offset. Every answer sets LastStableOffset;
// followers (replica id >= 0) read to the log end regardless.
//
// A read_committed consumer waiting (MinBytes) at the last stable offset
// is woken when it moves: it moves only when the high watermark passes a
// transaction marker, and a high watermark advance wakes the partition's
// waiting fetches (replica.Partition.SetHW), so the long poll re-reads
// with the new LSO. An incremental fetch session sends a partition whose
// LSO changed (01_fetch.go).
//
// Remote (tiered) reads are bounded by the last stable offset too: a
// read_committed fetch at or above it reads nothing from the bucket, and
// the batches read below it are cut at the first batch reaching it (the
// uploads stop at the LSO, so this only guards). Their aborted
// transactions come from the remote segments' .txnindex and then the
// local log's (remotelog/txn.go), so a transaction whose records are in
// the bucket and whose ABORT marker is local is listed too.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/tier"
)

// abortedTxnsResponse converts aborted transactions to the response's
// entries: a non-nil, possibly empty list, as Kafka answers a
// read_committed fetch.
func abortedTxnsResponse(txns []plog.AbortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(txns))
	for _, a := range txns {
		e := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		e.ProducerID, e.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, e)
	}
	return out
}

// boundRemoteCommitted finishes the remote reads of read_committed
// fetches: the records read from the bucket are cut below the last stable
// offset, and their aborted transactions are read from the remote log and
// on into the local log (remotelog/txn.go); a failed read of a remote
// .txnindex is KAFKA_STORAGE_ERROR for the partition, without records.
func (s *Server) boundRemoteCommitted(results []fetchResult) {
	for i := range results {
		r := &results[i]
		if !r.remote || !r.committed || r.code != 0 || r.records.Len == 0 {
			continue
		}
		last := cutPinnedBelow(&r.records, r.lso)
		if last < 0 {
			continue
		}
		if r.aborted, r.code = s.abortedTransactions(r.p, r.t.fetchOffset, last+1); r.code != 0 {
			r.records.Release()
			r.records.Len = 0
		}
	}
}

// Offsets inside a record batch header.
const (
	batchLenOff         = 8  // int32 batchLength, bytes after this field
	batchLastDeltaOff   = 23 // int32 lastOffsetDelta
	batchHeaderPrefixSz = 27 // through lastOffsetDelta
)

// cutPinnedBelow cuts the record batches of recs at the first batch whose
// last offset reaches upper, releasing recs when nothing is left. It
// returns the last offset of the batches kept, -1 when none is.
func cutPinnedBelow(recs *tier.Pinned, upper int64) int64 {
	var (
		pos  int64
		last int64 = -1
		hdr  [batchHeaderPrefixSz]byte
	)
	for pos+batchHeaderPrefixSz <= recs.Len {
		readParts(recs.Parts, pos, hdr[:])
		base := int64(binary.BigEndian.Uint64(hdr[:]))
		size := int64(int32(binary.BigEndian.Uint32(hdr[batchLenOff:]))) + 12
		lastOff := base + int64(int32(binary.BigEndian.Uint32(hdr[batchLastDeltaOff:])))
		if size < batchHeaderPrefixSz || lastOff >= upper {
			break
		}
		last = lastOff
		pos = min(pos+size, recs.Len) // a partial last batch is sent as is
	}
	if pos == recs.Len {
		return last
	}
	if pos == 0 {
		recs.Release()
		recs.Len = 0
		return -1
	}
	recs.Parts = truncateParts(recs.Parts, pos)
	recs.Len = pos
	return last
}

// readParts copies len(dst) bytes at logical position pos of parts.
func readParts(parts [][]byte, pos int64, dst []byte) {
	for _, p := range parts {
		if pos >= int64(len(p)) {
			pos -= int64(len(p))
			continue
		}
		n := copy(dst, p[pos:])
		dst = dst[n:]
		pos = 0
		if len(dst) == 0 {
			return
		}
	}
}

// truncateParts returns the first n bytes of parts, as parts.
func truncateParts(parts [][]byte, n int64) [][]byte {
	out := parts[:0:0]
	for _, p := range parts {
		if n <= 0 {
			break
		}
		if int64(len(p)) > n {
			p = p[:n]
		}
		out = append(out, p)
		n -= int64(len(p))
	}
	return out
}
