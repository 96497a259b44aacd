package config

import (
	"strings"
	"testing"
)

// The transaction coordinator's settings: Kafka's defaults, values read,
// bad values refused with the key's name, and __transaction_state's
// replication capped at the brokers there are.
func TestTransactionSettings(t *testing.T) {
	b, err := Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if b.TransactionStateLogNumPartitions != 50 || b.TransactionStateLogReplication != 3 || b.TransactionStateLogMinISR != 2 ||
		b.TransactionStateLogSegmentBytes != 104857600 || b.TransactionAbortTimedOutIntervalMs != 10000 ||
		b.TransactionRemoveExpiredIntervalMs != 3600000 || b.TransactionMaxTimeoutMs != 900000 ||
		b.TransactionalIDExpirationMs != 604800000 {
		t.Errorf("defaults: %+v", b)
	}
	for brokers, want := range map[int][2]int{1: {1, 1}, 2: {2, 2}, 5: {3, 2}} {
		rf, isr := b.TransactionStateReplicationFactor(brokers)
		if int(rf) != want[0] || int(isr) != want[1] {
			t.Errorf("%d brokers: replication factor %d, min ISR %d; want %v", brokers, rf, isr, want)
		}
	}
	b, err = Load(map[string]string{
		"transaction.state.log.num.partitions": "4", "transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr": "1", "transaction.state.log.segment.bytes": "1048576",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
		"transaction.remove.expired.transaction.cleanup.interval.ms":  "600",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.TransactionStateLogNumPartitions != 4 || b.TransactionStateLogReplication != 1 || b.TransactionStateLogMinISR != 1 ||
		b.TransactionStateLogSegmentBytes != 1048576 || b.TransactionAbortTimedOutIntervalMs != 500 || b.TransactionRemoveExpiredIntervalMs != 600 {
		t.Errorf("values: %+v", b)
	}
	for key, bad := range map[string]string{
		"transaction.state.log.num.partitions": "0", "transaction.state.log.replication.factor": "0",
		"transaction.state.log.min.isr": "0", "transaction.state.log.segment.bytes": "10",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "0",
	} {
		_, err := Load(map[string]string{key: bad})
		if err == nil || !strings.HasPrefix(err.Error(), key+": must be >= ") {
			t.Errorf("%s=%s: %v", key, bad, err)
		}
	}
}
