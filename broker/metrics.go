package broker

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"strata/controller"
	"strata/internal/obs"
)

// The broker's metrics, declared in the catalog of internal/obs (from
// which docs/metrics.md is generated). Names are Kafka's JMX metrics as
// the Prometheus JMX exporter's Kafka rules name them, where Kafka has
// them.
var (
	mRequests = obs.Counter("kafka_network_requestmetrics_requests_total",
		"Requests received, by API (Kafka's RequestMetrics RequestsPerSec).", "request")
	mRequestTime = obs.Histogram("kafka_network_requestmetrics_totaltimems",
		"Time from a request's decoding to its response being ready, in milliseconds, by API: it includes waits for replication (acks=all) and for fetch.min.bytes (Kafka's RequestMetrics TotalTimeMs).",
		[]float64{0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}, "request")
	mConnections = obs.Gauge("kafka_server_socket_server_connection_count",
		"Open client connections.")
	mBytesIn = obs.Counter("kafka_server_brokertopicmetrics_bytesin_total",
		"Record bytes appended by produce requests.")
	mBytesOut = obs.Counter("kafka_server_brokertopicmetrics_bytesout_total",
		"Record bytes sent in fetch responses to consumers.")
	mMessagesIn = obs.Counter("kafka_server_brokertopicmetrics_messagesin_total",
		"Records appended by produce requests.")
	mFailedProduce = obs.Counter("kafka_server_brokertopicmetrics_failedproducerequests_total",
		"Produce partition appends that failed.")
	mFailedFetch = obs.Counter("kafka_server_brokertopicmetrics_failedfetchrequests_total",
		"Fetch partition reads that failed with an error other than the ones clients handle in course (not leader, offset out of range, fenced epoch, unknown partition): storage errors, corrupt data.")
	mReplicationBytesIn = obs.Counter("kafka_server_brokertopicmetrics_replicationbytesin_total",
		"Record bytes this broker fetched from leaders and appended as a follower.")
	mReplicationBytesOut = obs.Counter("kafka_server_brokertopicmetrics_replicationbytesout_total",
		"Record bytes this broker sent to followers in replica fetch responses.")
	mFetchFromFollower = obs.Counter("strata_server_fetch_from_follower_partitions_total",
		"Partitions of consumer Fetch responses served by this broker as a follower (KIP-392).")
	mPreferredReadReplica = obs.Counter("strata_server_preferred_read_replica_partitions_total",
		"Partitions of consumer Fetch responses in which this leader named another replica to read from (KIP-392).")

	mPartitionCount = obs.Gauge("kafka_server_replicamanager_partitioncount",
		"Partitions this broker hosts a replica of.")
	mLeaderCount = obs.Gauge("kafka_server_replicamanager_leadercount",
		"Partitions this broker leads.")
	mUnderReplicated = obs.Gauge("kafka_server_replicamanager_underreplicatedpartitions",
		"Partitions this broker leads whose ISR is smaller than their replica set.")
	mUnderMinISR = obs.Gauge("kafka_server_replicamanager_underminisrpartitioncount",
		"Partitions this broker leads whose ISR is smaller than min.insync.replicas: acks=all produces to them fail with NOT_ENOUGH_REPLICAS.")
	mISRShrinks = obs.Counter("kafka_server_replicamanager_isrshrinks_total",
		"ISR shrinks this broker made as leader.")
	mISRExpands = obs.Counter("kafka_server_replicamanager_isrexpands_total",
		"ISR expansions this broker made as leader.")
	mActiveController = obs.Gauge("kafka_controller_kafkacontroller_activecontrollercount",
		"1 on the broker that is the active controller, else 0: the cluster's sum must be 1.")
	mOfflinePartitions = obs.Gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
		"Partitions without a leader; reported by the active controller only (0 elsewhere).")
	mNumGroups = obs.Gauge("kafka_server_groupmetadatamanager_numgroups",
		"Consumer groups this broker coordinates (classic, KIP-848, and groups known only by committed offsets).")
	mGroupLag = obs.Gauge("kafka_consumergroup_lag",
		"Records between a group's committed offset and the high watermark, per partition; reported by the group's coordinator for the partitions of which it hosts a replica (as kafka_exporter names it).",
		"consumergroup", "topic", "partition")
)

// metrics holds the broker's own collectors.
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	requestTime   *prometheus.HistogramVec
	connections   prometheus.Gauge
	bytesIn       prometheus.Counter
	bytesOut      prometheus.Counter
	messagesIn    prometheus.Counter
	produceErrors prometheus.Counter
	fetchErrors   prometheus.Counter
	// Bytes that crossed between brokers: fetched from leaders as a
	// follower, and sent to followers as a leader (not in bytesIn/Out).
	replicationBytesIn  prometheus.Counter
	replicationBytesOut prometheus.Counter

	// KIP-392 (no Kafka equivalent): partitions of consumer fetches
	// served as a follower, and answered with a preferred read replica.
	fetchFromFollower    prometheus.Counter
	preferredReadReplica prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg:                  prometheus.NewRegistry(),
		requests:             mRequests.NewCounterVec(),
		requestTime:          mRequestTime.NewHistogramVec(),
		connections:          mConnections.NewGauge(),
		bytesIn:              mBytesIn.NewCounter(),
		bytesOut:             mBytesOut.NewCounter(),
		messagesIn:           mMessagesIn.NewCounter(),
		produceErrors:        mFailedProduce.NewCounter(),
		fetchErrors:          mFailedFetch.NewCounter(),
		replicationBytesIn:   mReplicationBytesIn.NewCounter(),
		replicationBytesOut:  mReplicationBytesOut.NewCounter(),
		fetchFromFollower:    mFetchFromFollower.NewCounter(),
		preferredReadReplica: mPreferredReadReplica.NewCounter(),
	}
	m.reg.MustRegister(m.requests, m.requestTime, m.connections, m.bytesIn, m.bytesOut, m.messagesIn,
		m.produceErrors, m.fetchErrors, m.replicationBytesIn, m.replicationBytesOut,
		m.fetchFromFollower, m.preferredReadReplica,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// registerStateMetrics registers the gauges read from the broker's state
// at each scrape (replicas, controller, groups) and the ISR counters.
func (s *Server) registerStateMetrics() {
	if mc, ok := s.ctrl.(interface{ Collectors() []prometheus.Collector }); ok {
		s.metrics.reg.MustRegister(mc.Collectors()...) // ZooKeeper mode: elections
	}
	s.metrics.reg.MustRegister(stateCollector{s},
		mISRShrinks.NewCounterFunc(func() float64 { return float64(s.replicas.ISRShrinks.Load()) }),
		mISRExpands.NewCounterFunc(func() float64 { return float64(s.replicas.ISRExpands.Load()) }))
}

// stateCollector computes the replica, controller and group gauges from
// the current metadata and the partitions this broker hosts.
type stateCollector struct{ s *Server }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []obs.Def{mPartitionCount, mLeaderCount, mUnderReplicated, mUnderMinISR,
		mActiveController, mOfflinePartitions, mNumGroups, mGroupLag} {
		ch <- d.Desc()
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d obs.Def, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.Desc(), d.ValueType(), float64(v), labels...)
	}
	ctrl := s.ctrl
	var md *controller.Metadata
	if ctrl != nil {
		md = ctrl.Metadata()
	}
	parts := s.allPartitions()
	var leaders, under, underMin int
	for _, p := range parts {
		if md == nil {
			break
		}
		t := md.Topics[p.Topic()]
		if t == nil || t.ID != p.TopicID() || int(p.Index()) >= len(t.Partitions) {
			continue
		}
		pm := t.Partitions[p.Index()]
		if pm.Leader != s.cfg.ID {
			continue
		}
		leaders++
		if len(pm.ISR) < len(pm.Replicas)-len(pm.RemovingReplicas) {
			under++
		}
		if len(pm.ISR) < int(p.MinISR()) {
			underMin++
		}
	}
	gauge(mPartitionCount, len(parts))
	gauge(mLeaderCount, leaders)
	gauge(mUnderReplicated, under)
	gauge(mUnderMinISR, underMin)

	active := ctrl != nil
	if a, ok := ctrl.(activeController); ok {
		active = a.IsActive()
	}
	offline := 0
	if active && md != nil {
		for _, t := range md.Topics {
			for _, pm := range t.Partitions {
				if pm.Leader < 0 {
					offline++
				}
			}
		}
	}
	gauge(mActiveController, boolInt(active))
	gauge(mOfflinePartitions, offline)

	if s.groups == nil || s.groups.coord == nil {
		gauge(mNumGroups, 0)
		return
	}
	coord := s.groups.coord
	gauge(mNumGroups, coord.NumGroups())
	for _, op := range coord.Owned() {
		offs, ok := coord.PartitionOffsets(op)
		if !ok {
			continue
		}
		for g, m := range offs {
			for tp, e := range m {
				p := s.partition(tp.Topic, tp.Partition)
				if p == nil || e.Offset < 0 {
					continue
				}
				gauge(mGroupLag, int(max(p.HW()-e.Offset, 0)), g, tp.Topic, strconv.Itoa(int(tp.Partition)))
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fetchFailed tells whether a fetch partition's error code counts as a
// failed fetch (Kafka's FailedFetchRequestsPerSec): errors clients handle
// in course do not.
func fetchFailed(code int16) bool {
	return code != 0 && !slices.Contains(expectedFetchCodes, code)
}

// Registry is the broker's metrics registry, for the /metrics endpoint.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// expectedFetchCodes are the fetch errors that are not failures.
var expectedFetchCodes = []int16{
	kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code,
	kerr.OffsetOutOfRange.Code, kerr.OffsetMovedToTieredStorage.Code, kerr.ReplicaNotAvailable.Code,
	kerr.LeaderNotAvailable.Code, kerr.UnknownTopicID.Code, kerr.UnknownTopicOrPartition.Code,
	kerr.TopicAuthorizationFailed.Code, kerr.InconsistentTopicID.Code,
}
