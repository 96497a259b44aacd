package broker

import "github.com/prometheus/client_golang/prometheus"

// metrics use Kafka's names where Kafka has them (kafka.server
// BrokerTopicMetrics as Prometheus-style names).
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	connections   prometheus.Gauge
	bytesIn       prometheus.Counter
	bytesOut      prometheus.Counter
	messagesIn    prometheus.Counter
	produceErrors prometheus.Counter
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
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_requests_total", Help: "Requests received, by API.",
		}, []string{"request"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kafka_server_socket_server_connection_count", Help: "Open client connections.",
		}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_brokertopicmetrics_bytesin_total", Help: "Record bytes appended by produce requests.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_brokertopicmetrics_bytesout_total", Help: "Record bytes sent in fetch responses.",
		}),
		messagesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_brokertopicmetrics_messagesin_total", Help: "Records appended by produce requests.",
		}),
		produceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_brokertopicmetrics_failedproducerequests_total", Help: "Produce partition appends that failed.",
		}),
		replicationBytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_brokertopicmetrics_replicationbytesin_total", Help: "Record bytes this broker fetched from leaders and appended as a follower.",
		}),
		replicationBytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_brokertopicmetrics_replicationbytesout_total", Help: "Record bytes this broker sent to followers in replica fetch responses.",
		}),
		fetchFromFollower: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_server_fetch_from_follower_partitions_total", Help: "Partitions of consumer Fetch responses served by this broker as a follower (KIP-392).",
		}),
		preferredReadReplica: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_server_preferred_read_replica_partitions_total", Help: "Partitions of consumer Fetch responses in which this leader named another replica to read from (KIP-392).",
		}),
	}
	m.reg.MustRegister(m.requests, m.connections, m.bytesIn, m.bytesOut, m.messagesIn, m.produceErrors,
		m.replicationBytesIn, m.replicationBytesOut,
		m.fetchFromFollower, m.preferredReadReplica,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Registry is the broker's metrics registry, for the /metrics endpoint.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }
