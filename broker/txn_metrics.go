package broker

// Metrics of transactions: the marker sender's queues (Kafka's
// TransactionMarkerChannelManager), the leaders' verifications (Kafka's
// AddPartitionsToTxnManager), the producer ids of the partitions this
// broker hosts (Kafka's ReplicaManager ProducerIdCount, KIP-854), and the
// transactions this broker's coordinator has open.

import (
	"github.com/prometheus/client_golang/prometheus"

	"strata/broker/txn"
	"strata/internal/obs"
)

var (
	mMarkersUnknownDestination = obs.Gauge("kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize",
		"Transaction markers waiting for their partition to have a leader (Kafka's TransactionMarkerChannelManager UnknownDestinationQueueSize): above 0 for long, ended transactions hold the last stable offset of those partitions.")
	mMarkersLogAppendRetry = obs.Gauge("kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize",
		"Transactions whose markers are written and whose completion failed to be written to __transaction_state, waiting to be retried (Kafka's TransactionMarkerChannelManager LogAppendRetryQueueSize).")
	mVerificationTime = obs.Histogram("kafka_server_addpartitionstotxnmanager_verificationtimems",
		"Time a partition leader waited for the transaction coordinator to verify a transactional write (KIP-890), in milliseconds (Kafka's AddPartitionsToTxnManager VerificationTimeMs).",
		[]float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 15000})
	mVerificationFailures = obs.Counter("kafka_server_addpartitionstotxnmanager_verificationfailurerate_total",
		"Partitions of transactional writes the verification refused or could not complete (Kafka's AddPartitionsToTxnManager VerificationFailureRate): the producer was answered an error.")
	mProducerIDCount = obs.Gauge("kafka_server_replicamanager_produceridcount",
		"Producer ids in the producer state of the partitions this broker hosts (Kafka's ReplicaManager ProducerIdCount, KIP-854); producer.id.expiration.ms bounds it.")
	mOpenTransactions = obs.Gauge("strata_coordinator_transaction_open_transactions",
		"Transactions of the transactional ids this broker coordinates that are open (Ongoing) or ending (PrepareCommit, PrepareAbort, PrepareEpochFence): each holds the last stable offset of its partitions until its markers are written. Summed over the brokers, 0 means no transaction is left to end (before a scale to zero).")
)

// openTxnStates are the states of a transaction not yet ended.
var openTxnStates = []txn.State{txn.Ongoing, txn.PrepareCommit, txn.PrepareAbort, txn.PrepareEpochFence}

// registerTxnMetrics registers the transaction metrics of h's broker.
func (h *txnHost) registerTxnMetrics() {
	s := h.s
	s.metrics.reg.MustRegister(
		mMarkersUnknownDestination.NewGaugeFunc(func() float64 { return float64(h.markers.unknownDestination.Load()) }, nil),
		mMarkersLogAppendRetry.NewGaugeFunc(func() float64 { return float64(h.markers.logAppendRetry.Load()) }, nil),
		h.metrics.verificationTime, h.metrics.verificationFailures,
		mProducerIDCount.NewGaugeFunc(func() float64 {
			n := 0
			for _, p := range s.allPartitions() {
				n += p.Log().ProducerCount()
			}
			return float64(n)
		}, nil),
		mOpenTransactions.NewGaugeFunc(func() float64 {
			open, _ := h.coord.List(txn.ListFilter{States: openTxnStates, DurationMs: -1})
			return float64(len(open))
		}, nil),
	)
}

// txnMetrics are the collectors the request path updates.
type txnMetrics struct {
	verificationTime     prometheus.Histogram
	verificationFailures prometheus.Counter
}

func newTxnMetrics() txnMetrics {
	return txnMetrics{
		verificationTime:     mVerificationTime.NewHistogram(),
		verificationFailures: mVerificationFailures.NewCounter(),
	}
}
