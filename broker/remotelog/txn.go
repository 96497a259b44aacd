package remotelog

// Transactions over tiered storage: the aborted transactions that a
// read_committed fetch returns with its records, wherever those lie.
// Uploads stop at the last stable offset (manager.go), each segment goes
// up with its .txnindex and its producer snapshot (tier's uploader), so a
// replica rebuilt from the bucket (follower.go, restore.go) starts with
// the transactions open at its new log start.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/plog"
)

// AbortedTransactions returns the aborted transactions that overlap
// [from, upper) of p for a read_committed fetch returning the batches in
// that range, from the bucket, the local log, or both
// (tier.Reader.AbortedTransactions): a transaction whose records are in
// the bucket and whose ABORT marker is local, or in a later remote
// segment, is listed however the fetch's range falls. A fetch at or above
// the local log start, or of a partition that is not tiered (or rm nil:
// tiered storage off), asks the local log alone, without a lock beyond
// the log's. A failed read of a remote .txnindex is KAFKA_STORAGE_ERROR
// for the partition, as a failed remote read of records is.
func (rm *Manager) AbortedTransactions(p Partition, from, upper int64) ([]plog.AbortedTxn, int16) {
	l := p.Log()
	if rm == nil || from >= l.LogStartOffset() || !rm.RemoteReadable(p) {
		return l.AbortedTransactions(from, upper), 0
	}
	ctx, cancel := context.WithTimeout(rm.ctx, remoteReadTimeout)
	defer cancel()
	out, err := rm.read.reader.AbortedTransactions(ctx, rm.idx, tierPartition(p), l, from, upper)
	if err != nil {
		rm.warnings.Warn(rm.log, "read remote transaction index failed", "topic", p.Topic(), "partition", p.Index(),
			"from", from, "upper", upper, "err", err)
		return nil, kerr.KafkaStorageError.Code
	}
	return out, 0
}

// openTransaction is one producer's open transaction, as logged.
type openTransaction struct {
	ProducerID  int64 `json:"producer_id"`
	FirstOffset int64 `json:"first_offset"`
}

// openTransactions lists the log's open transactions.
func openTransactions(l *plog.Log) []openTransaction {
	var out []openTransaction
	for _, pi := range l.Producers() {
		if pi.CurrentTxnStartOffset >= 0 {
			out = append(out, openTransaction{pi.ProducerID, pi.CurrentTxnStartOffset})
		}
	}
	return out
}
