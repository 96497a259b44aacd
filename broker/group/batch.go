package group

// Record batches of __consumer_offsets: the coordinator writes each group
// of records it must make durable together as one uncompressed record
// batch (no producer id, or a transactional offset commit's producer),
// and reads batches back when it loads a partition, in the format of
// package plog's coordinator batches (kvbatch.go).

import (
	"time"

	"strata/broker/plog"
)

// Record is one __consumer_offsets record; a nil Value is a tombstone.
type Record = plog.KV

// batchHead is what the loader needs of a batch's header.
type batchHead = plog.KVBatchHead

// batchProducer is the producer a batch is written for (txn_offsets.go).
type batchProducer = plog.BatchProducer

// encodeBatch builds one batch of recs stamped with now, without a
// producer.
func encodeBatch(recs []Record, now time.Time) []byte {
	return plog.EncodeKVBatch(recs, now, plog.NoProducer)
}

// encodeProducerBatch is encodeBatch with the producer fields of p.
func encodeProducerBatch(recs []Record, now time.Time, p batchProducer) []byte {
	return plog.EncodeKVBatch(recs, now, p)
}

// decodeBatches calls fn for every record of every data batch in data,
// which holds whole batches; control batches are skipped.
func decodeBatches(data []byte, fn func(Record) error) error {
	return plog.DecodeKVBatches(data, fn)
}

// walkBatches calls fn with the header and bytes of every batch in data.
func walkBatches(data []byte, fn func(h batchHead, b []byte) error) error {
	return plog.WalkKVBatches(data, fn)
}

// batchRecords calls fn with the offset delta and content of every record
// of a data batch b.
func batchRecords(b []byte, fn func(offsetDelta int64, r Record) error) error {
	return plog.KVBatchRecords(b, fn)
}
