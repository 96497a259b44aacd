package txn

// Record batches of __transaction_state: the coordinator writes the
// records it must make durable together as one uncompressed record batch
// (no producer id) and reads batches back when it loads a partition, in
// the format of package plog's coordinator batches (kvbatch.go), as the
// group coordinator does.

import (
	"time"

	"strata/broker/plog"
)

// Record is one __transaction_state record; a nil Value is a tombstone.
type Record = plog.KV

// encodeBatch builds one batch of recs stamped with now.
func encodeBatch(recs []Record, now time.Time) []byte {
	return plog.EncodeKVBatch(recs, now, plog.NoProducer)
}

// decodeBatches calls fn for every record of every data batch in data,
// which holds whole batches; control batches are skipped.
func decodeBatches(data []byte, fn func(Record) error) error {
	return plog.DecodeKVBatches(data, fn)
}
