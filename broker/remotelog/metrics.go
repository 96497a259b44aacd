package remotelog

import (
	"github.com/prometheus/client_golang/prometheus"

	"strata/internal/obs"
	"strata/tier"
)

// The tier's metrics, declared in the catalog of internal/obs (from which
// docs/metrics.md is generated).
var (
	mRemotefetchbytesTotal = obs.Counter("kafka_server_brokertopicmetrics_remotefetchbytes_total",
		"Record bytes read from remote storage for consumer fetches.")
	mRemotefetchrequestsTotal = obs.Counter("kafka_server_brokertopicmetrics_remotefetchrequests_total",
		"Partition reads of consumer fetches served from remote storage.")
	mRemotefetcherrorsTotal = obs.Counter("kafka_server_brokertopicmetrics_remotefetcherrors_total",
		"Partition reads from remote storage that failed (KAFKA_STORAGE_ERROR).")
	mRemotelogreaderfetchrateandtimems = obs.Histogram("kafka_log_remote_remotelogmanager_remotelogreaderfetchrateandtimems",
		"Time a partition's read from remote storage took, in milliseconds.",
		obs.MillisBuckets)
	mReaderCacheHitsTotal = obs.Counter("strata_remote_log_reader_cache_hits_total",
		"Lookups of remote .log chunks and index objects found in the reader's cache.")
	mReaderCacheMissesTotal = obs.Counter("strata_remote_log_reader_cache_misses_total",
		"Lookups of remote .log chunks and index objects that waited for a GET (their own or a read-ahead's).")
	mReaderCacheSizeBytes = obs.Gauge("strata_remote_log_reader_cache_size_bytes",
		"Bytes of remote .log chunks in the reader's cache (bound: remote.log.reader.cache.size.bytes).")
	mReaderIndexCacheSizeBytes = obs.Gauge("strata_remote_log_reader_index_cache_size_bytes",
		"Bytes of parsed remote index objects in the reader's cache (bound: remote.log.index.file.cache.total.size.bytes).")
	mRemotecopybytesTotal = obs.Counter("kafka_server_brokertopicmetrics_remotecopybytes_total",
		"Bytes of segment objects copied to remote storage.")
	mRemotecopyrequestsTotal = obs.Counter("kafka_server_brokertopicmetrics_remotecopyrequests_total",
		"Segments copied to remote storage.")
	mRemotecopyerrorsTotal = obs.Counter("kafka_server_brokertopicmetrics_remotecopyerrors_total",
		"Copy passes of a partition that failed (retried at the next pass).")
	mRemotecopylagbytes = obs.Gauge("kafka_server_brokertopicmetrics_remotecopylagbytes",
		"Bytes of sealed segments below the last stable offset not yet copied, after the last pass.")
	mRemotecopylagsegments = obs.Gauge("kafka_server_brokertopicmetrics_remotecopylagsegments",
		"Sealed segments below the last stable offset not yet copied, after the last pass.")
	mBuildremotelogauxstaterequestsTotal = obs.Counter("kafka_server_brokertopicmetrics_buildremotelogauxstaterequests_total",
		"Followers' rebuilds of a partition's log state (epochs, producers) from remote storage.")
	mFailedbuildremotelogauxstaterequestsTotal = obs.Counter("kafka_server_brokertopicmetrics_failedbuildremotelogauxstaterequests_total",
		"Followers' rebuilds of a partition's log state from remote storage that failed (retried).")
	mOrphanObjectsDeletedTotal = obs.Counter("strata_remote_log_orphan_objects_deleted_total",
		"Orphaned objects deleted from remote storage by reconciliation.")
	mReconciliationErrorsTotal = obs.Counter("strata_remote_log_reconciliation_errors_total",
		"Reconciliation calls (a partition, or the deleted topics) that failed.")
	mUnrecognizedObjects = obs.Gauge("strata_remote_log_unrecognized_objects",
		"Objects outside the remote storage key layout found by the last reconciliation, left alone.")
	mLifecycleSyncErrorsTotal = obs.Counter("strata_remote_log_lifecycle_sync_errors_total",
		"Failed syncs of the bucket lifecycle rules (retried at the next pass).")
	mRemotedeleterequestsTotal = obs.Counter("kafka_server_brokertopicmetrics_remotedeleterequests_total",
		"Remote segment deletions started (retention, DeleteRecords, remote storage turned off).")
	mRemotedeleteerrorsTotal = obs.Counter("kafka_server_brokertopicmetrics_remotedeleteerrors_total",
		"Remote segment deletions that failed (retried at the next pass).")
	mRemotelogsizebytes = obs.Gauge("kafka_server_brokertopicmetrics_remotelogsizebytes",
		"Bytes of the remote log segments of the partitions this broker leads, after the last pass.")
	mCopyLagSeconds = obs.Gauge("strata_remote_log_copy_lag_seconds",
		"Upload lag in time: age of the oldest sealed segment below the last stable offset not yet copied (now minus its largest record timestamp), over the partitions this broker leads, after the last pass; 0 when none waits.")
)

var (
	mBucketRequests = obs.Counter("strata_remote_storage_requests_total",
		"HTTP requests sent to the S3 bucket, every attempt of a retried call included, by S3 operation and price class (A: PUT, COPY, POST, LIST; B: GET, HEAD and the rest; free: DELETE).",
		"operation", "class")
	mBucketCost = obs.Counter("strata_remote_storage_requests_cost_dollars_total",
		"Estimated cost of the requests to the S3 bucket, in US dollars, at Amazon S3 Standard's us-east-1 request prices ($0.005 per 1,000 class A requests, $0.0004 per 1,000 class B); storage and transfer not included.")
)

// requestCounter is a store that counts its requests (tier.S3Store).
type requestCounter interface{ RequestCounts() map[string]int64 }

// bucketCollector exports a store's request counts and their estimated
// cost.
type bucketCollector struct{ store requestCounter }

func (c bucketCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mBucketRequests.Desc()
	ch <- mBucketCost.Desc()
}

func (c bucketCollector) Collect(ch chan<- prometheus.Metric) {
	cost := 0.0
	for op, n := range c.store.RequestCounts() {
		class := tier.RequestClass(op)
		cost += float64(n) * tier.RequestPrices[class]
		ch <- prometheus.MustNewConstMetric(mBucketRequests.Desc(), prometheus.CounterValue, float64(n), op, class)
	}
	ch <- prometheus.MustNewConstMetric(mBucketCost.Desc(), prometheus.CounterValue, cost)
}
