package config

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Listener is one entry of listeners / advertised.listeners.
type Listener struct {
	Name string // e.g. PLAINTEXT
	Host string // empty: all interfaces (listeners) or the machine's name
	Port int32
	// Protocol is the listener's security protocol (PLAINTEXT, SSL, …),
	// from listener.security.protocol.map; set by Load.
	Protocol string
}

// Addr returns host:port.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))) }

// String returns NAME://host:port.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// ListenerFor returns the listeners value for a --listen / --advertise
// HOST:PORT flag: PLAINTEXT://HOST:PORT.
func ListenerFor(hostPort string) string { return "PLAINTEXT://" + hostPort }

// ParseListeners parses a comma-separated list of NAME://HOST:PORT. Names
// must be unique; their protocols are set by Load.
func ParseListeners(s string) ([]Listener, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("must list at least one NAME://HOST:PORT")
	}
	var out []Listener
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, hostPort, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME://HOST:PORT", item)
		}
		name = strings.ToUpper(name)
		host, portStr, err := net.SplitHostPort(hostPort)
		if err != nil {
			return nil, fmt.Errorf("%q is not NAME://HOST:PORT", item)
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("%q: bad port %q", item, portStr)
		}
		if seen[name] {
			return nil, fmt.Errorf("listener name %s appears twice", name)
		}
		seen[name] = true
		out = append(out, Listener{Name: name, Host: host, Port: int32(port)})
	}
	return out, nil
}

// Broker is the static broker configuration: server.properties and --set,
// checked, with typed fields for what the server uses. Dynamic overrides
// are applied through Resolver.
type Broker struct {
	ID                  int32
	Rack                *string
	Listeners           []Listener
	AdvertisedListeners []Listener // one per listener, in the same order (listeners.go)
	// InterBrokerListener is the name of the listener brokers use to
	// reach each other; ControlPlaneListener the one the controller uses
	// to reach brokers ("" : the inter-broker listener).
	InterBrokerListener  string
	ControlPlaneListener string
	DataDir              string

	SocketRequestMaxBytes int32
	QueuedMaxRequests     int32
	ConnectionsMaxIdleMs  int64
	NumIOThreads          int32
	NumNetworkThreads     int32

	// queued.max.request.bytes; <= 0: no bound.
	QueuedMaxRequestBytes int64
	// max.connections, max.connections.per.ip and its overrides (parsed,
	// host or IP to count), as set statically; the broker reads the
	// effective (dynamic) values through Resolver.
	MaxConnections               int32
	MaxConnectionsPerIP          int32
	MaxConnectionsPerIPOverrides map[string]int32

	ZooKeeperConnect             string // empty: embedded controller
	ZooKeeperSessionTimeoutMs    int32
	ZooKeeperConnectionTimeoutMs int32 // zookeeper.session.timeout.ms when unset
	// zookeeper.set.acl, zookeeper.digest.user and
	// zookeeper.digest.password (sensitive: never log it).
	ZooKeeperSetACL         bool
	ZooKeeperDigestUser     string
	ZooKeeperDigestPassword string

	// AuthorizerClassName is authorizer.class.name ("": no authorizer);
	// SuperUsers is super.users as written; AllowEveryoneIfNoACLFound is
	// allow.everyone.if.no.acl.found.
	AuthorizerClassName       string
	SuperUsers                string
	AllowEveryoneIfNoACLFound bool

	NumPartitions               int32
	DefaultReplicationFactor    int16
	MinInsyncReplicas           int32
	AutoCreateTopicsEnable      bool
	DeleteTopicEnable           bool
	UncleanLeaderElectionEnable bool
	AutoLeaderRebalanceEnable   bool
	// leader.imbalance.check.interval.seconds and
	// leader.imbalance.per.broker.percentage.
	LeaderImbalanceCheckIntervalSeconds int64
	LeaderImbalancePerBrokerPercentage  int
	ReplicaLagTimeMaxMs                 int64
	// replica.high.watermark.checkpoint.interval.ms
	ReplicaHighWatermarkCheckpointIntervalMs int64
	// replica.selector.class: "" (leader only) or a ReplicaSelectorClasses
	// entry.
	ReplicaSelectorClass string
	// Controlled shutdown (controlled.shutdown.*).
	ControlledShutdownEnable         bool
	ControlledShutdownMaxRetries     int32
	ControlledShutdownRetryBackoffMs int64
	MessageMaxBytes                  int32
	FetchMaxBytes                    int32
	// socket.sendfile.enable: fetch responses send local records with
	// sendfile(2) rather than pread(2) and one writev(2).
	SocketSendfileEnable bool

	LogRetentionCheckIntervalMs int64
	LogFlushSchedulerIntervalMs int64

	RemoteLogStorageSystemEnable          bool
	FollowerFetchLastTieredOffsetEnable   bool
	RemoteLogManagerSegmentIdleRollMs     int64
	RemoteLogManagerTaskIntervalMs        int64
	RemoteLogManagerCopierThreadPoolSize  int
	RemoteLogManagerCopyMaxBytesPerSecond int64
	// The remote reader's caches and read-ahead.
	RemoteLogIndexFileCacheTotalSizeBytes int64
	RemoteLogReaderCacheSizeBytes         int64
	RemoteLogReaderReadaheadChunks        int
	// Bucket lifecycle rules and orphan reconciliation
	// (remote.log.storage.lifecycle.*, remote.log.reconciliation.*;
	// interval -1: off).
	RemoteLogStorageLifecycleRulesEnable bool
	RemoteLogStorageLifecycleMarginMs    int64
	RemoteLogReconciliationIntervalMs    int64
	RemoteLogReconciliationGraceMs       int64

	OffsetsTopicNumPartitions       int32
	OffsetsTopicReplicationFactor   int16
	OffsetsRetentionMinutes         int32
	OffsetsRetentionCheckIntervalMs int64
	OffsetMetadataMaxBytes          int32
	GroupMaxSize                    int32
	GroupMinSessionTimeoutMs        int32
	GroupMaxSessionTimeoutMs        int32
	GroupInitialRebalanceDelayMs    int32
	TransactionalIDExpirationMs     int32
	TransactionMaxTimeoutMs         int32
	// TransactionVersion is the finalized level of the transaction.version
	// feature (0-2) the broker advertises in ApiVersions.
	TransactionVersion int16
	// transaction.state.log.* (the __transaction_state topic) and the
	// transaction coordinator's cleanup intervals.
	TransactionStateLogNumPartitions   int32
	TransactionStateLogReplication     int16
	TransactionStateLogMinISR          int32
	TransactionStateLogSegmentBytes    int32
	TransactionAbortTimedOutIntervalMs int64
	TransactionRemoveExpiredIntervalMs int64
	ProducerIDExpirationMs             int32

	// Static holds every known key given in server.properties or --set, in
	// canonical form (see Def.Canonical); ignored keys are left out.
	Static map[string]string
	// Ignored lists the accepted-but-ignored keys that were given, sorted,
	// for a log line.
	Ignored []string
}

// CheckStatic checks raw static properties: every key must be a known
// broker config or an ignored Kafka key, and every value valid. It returns
// the known keys in canonical form and the ignored keys. The error is one
// line naming the first bad key (in sorted order).
func CheckStatic(props map[string]string) (static map[string]string, ignored []string, err error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	static = make(map[string]string, len(props))
	for _, k := range keys {
		d, ok := BrokerDef(k)
		if !ok {
			if ignoredKeys[k] {
				ignored = append(ignored, k)
				continue
			}
			if why := refusedReason(k); why != "" {
				return nil, nil, fmt.Errorf("%s: %s", k, why)
			}
			if _, isTopic := TopicDef(k); isTopic {
				if syn := topicSynonyms[k]; len(syn) > 0 {
					return nil, nil, fmt.Errorf("unknown broker config %q (it is a topic config; the broker default is %s)", k, syn[0].name)
				}
				return nil, nil, fmt.Errorf("unknown broker config %q (it is a topic config)", k)
			}
			return nil, nil, fmt.Errorf("unknown broker config %q", k)
		}
		c, err := d.Canonical(props[k])
		if err != nil {
			return nil, nil, err
		}
		static[k] = c
	}
	return static, ignored, nil
}

// Load builds the Broker from static properties (server.properties merged
// with --set items) and validates it.
func Load(props map[string]string) (*Broker, error) {
	static, ignored, err := CheckStatic(props)
	if err != nil {
		return nil, err
	}
	g := getter{static}
	b := &Broker{Static: static, Ignored: ignored}

	b.ID = int32(g.int("broker.id"))
	if _, ok := static["broker.id"]; !ok {
		if _, ok := static["node.id"]; ok {
			b.ID = int32(g.int("node.id"))
		}
	}
	if r, ok := static["broker.rack"]; ok {
		b.Rack = &r
	}
	if b.Listeners, err = ParseListeners(g.str("listeners")); err != nil {
		return nil, fmt.Errorf("listeners: %w", err)
	}
	if err := b.loadListeners(g); err != nil {
		return nil, err
	}
	dirKey := "log.dir"
	if _, ok := static["log.dirs"]; ok {
		dirKey = "log.dirs"
	}
	dirs := g.list(dirKey)
	if len(dirs) != 1 {
		return nil, fmt.Errorf("%s: Strata supports exactly one data directory, got %d", dirKey, len(dirs))
	}
	b.DataDir = dirs[0]

	b.SocketRequestMaxBytes = int32(g.int("socket.request.max.bytes"))
	b.SocketSendfileEnable = g.bool("socket.sendfile.enable")
	b.QueuedMaxRequests = int32(g.int("queued.max.requests"))
	b.ConnectionsMaxIdleMs = g.int("connections.max.idle.ms")
	b.QueuedMaxRequestBytes = g.int("queued.max.request.bytes")
	b.MaxConnections = int32(g.int("max.connections"))
	b.MaxConnectionsPerIP = int32(g.int("max.connections.per.ip"))
	b.MaxConnectionsPerIPOverrides, _ = ParseConnectionOverrides(g.str("max.connections.per.ip.overrides"))
	b.NumIOThreads = int32(g.int("num.io.threads"))
	b.NumNetworkThreads = int32(g.int("num.network.threads"))

	b.ZooKeeperConnect = g.str("zookeeper.connect")
	b.ZooKeeperSessionTimeoutMs = int32(g.int("zookeeper.session.timeout.ms"))
	b.ZooKeeperConnectionTimeoutMs = b.ZooKeeperSessionTimeoutMs
	if _, ok := static["zookeeper.connection.timeout.ms"]; ok {
		b.ZooKeeperConnectionTimeoutMs = int32(g.int("zookeeper.connection.timeout.ms"))
	}
	b.ZooKeeperSetACL = g.bool("zookeeper.set.acl")
	b.ZooKeeperDigestUser = g.str("zookeeper.digest.user")
	b.ZooKeeperDigestPassword = g.str("zookeeper.digest.password")
	b.AuthorizerClassName = g.str("authorizer.class.name")
	b.SuperUsers = g.str("super.users")
	b.AllowEveryoneIfNoACLFound = g.bool("allow.everyone.if.no.acl.found")

	b.NumPartitions = int32(g.int("num.partitions"))
	b.DefaultReplicationFactor = int16(min(g.int("default.replication.factor"), 1<<15-1))
	b.MinInsyncReplicas = int32(g.int("min.insync.replicas"))
	b.AutoCreateTopicsEnable = g.bool("auto.create.topics.enable")
	b.DeleteTopicEnable = g.bool("delete.topic.enable")
	b.UncleanLeaderElectionEnable = g.bool("unclean.leader.election.enable")
	b.AutoLeaderRebalanceEnable = g.bool("auto.leader.rebalance.enable")
	b.LeaderImbalanceCheckIntervalSeconds = g.int("leader.imbalance.check.interval.seconds")
	b.LeaderImbalancePerBrokerPercentage = int(g.int("leader.imbalance.per.broker.percentage"))
	b.ReplicaLagTimeMaxMs = g.int("replica.lag.time.max.ms")
	b.ReplicaHighWatermarkCheckpointIntervalMs = g.int("replica.high.watermark.checkpoint.interval.ms")
	b.ReplicaSelectorClass = g.str("replica.selector.class")
	b.ControlledShutdownEnable = g.bool("controlled.shutdown.enable")
	b.ControlledShutdownMaxRetries = int32(g.int("controlled.shutdown.max.retries"))
	b.ControlledShutdownRetryBackoffMs = g.int("controlled.shutdown.retry.backoff.ms")
	b.MessageMaxBytes = int32(g.int("message.max.bytes"))
	b.FetchMaxBytes = int32(g.int("fetch.max.bytes"))

	b.LogRetentionCheckIntervalMs = g.int("log.retention.check.interval.ms")
	b.LogFlushSchedulerIntervalMs = g.int("log.flush.scheduler.interval.ms")

	b.RemoteLogStorageSystemEnable = g.bool("remote.log.storage.system.enable")
	b.FollowerFetchLastTieredOffsetEnable = g.bool("follower.fetch.last.tiered.offset.enable")
	b.RemoteLogManagerSegmentIdleRollMs = g.int("remote.log.manager.segment.idle.roll.ms")
	b.RemoteLogManagerTaskIntervalMs = g.int("remote.log.manager.task.interval.ms")
	b.RemoteLogManagerCopierThreadPoolSize = int(g.int("remote.log.manager.copier.thread.pool.size"))
	b.RemoteLogManagerCopyMaxBytesPerSecond = g.int("remote.log.manager.copy.max.bytes.per.second")
	b.RemoteLogIndexFileCacheTotalSizeBytes = g.int("remote.log.index.file.cache.total.size.bytes")
	b.RemoteLogReaderCacheSizeBytes = g.int("remote.log.reader.cache.size.bytes")
	b.RemoteLogReaderReadaheadChunks = int(g.int("remote.log.reader.readahead.chunks"))
	b.RemoteLogStorageLifecycleRulesEnable = g.bool("remote.log.storage.lifecycle.rules.enable")
	b.RemoteLogStorageLifecycleMarginMs = g.int("remote.log.storage.lifecycle.margin.ms")
	b.RemoteLogReconciliationIntervalMs = g.int("remote.log.reconciliation.interval.ms")
	b.RemoteLogReconciliationGraceMs = g.int("remote.log.reconciliation.grace.ms")

	b.OffsetsTopicNumPartitions = int32(g.int("offsets.topic.num.partitions"))
	b.OffsetsTopicReplicationFactor = int16(g.int("offsets.topic.replication.factor"))
	b.OffsetsRetentionMinutes = int32(g.int("offsets.retention.minutes"))
	b.OffsetsRetentionCheckIntervalMs = g.int("offsets.retention.check.interval.ms")
	b.OffsetMetadataMaxBytes = int32(g.int("offset.metadata.max.bytes"))
	b.GroupMaxSize = int32(g.int("group.max.size"))
	b.GroupMinSessionTimeoutMs = int32(g.int("group.min.session.timeout.ms"))
	b.GroupMaxSessionTimeoutMs = int32(g.int("group.max.session.timeout.ms"))
	b.GroupInitialRebalanceDelayMs = int32(g.int("group.initial.rebalance.delay.ms"))
	b.TransactionalIDExpirationMs = int32(g.int("transactional.id.expiration.ms"))
	b.TransactionMaxTimeoutMs = int32(g.int("transaction.max.timeout.ms"))
	b.TransactionVersion = int16(g.int("transaction.version"))
	b.TransactionStateLogNumPartitions = int32(g.int("transaction.state.log.num.partitions"))
	b.TransactionStateLogReplication = int16(g.int("transaction.state.log.replication.factor"))
	b.TransactionStateLogMinISR = int32(g.int("transaction.state.log.min.isr"))
	b.TransactionStateLogSegmentBytes = int32(g.int("transaction.state.log.segment.bytes"))
	b.TransactionAbortTimedOutIntervalMs = g.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
	b.TransactionRemoveExpiredIntervalMs = g.int("transaction.remove.expired.transaction.cleanup.interval.ms")
	b.ProducerIDExpirationMs = int32(g.int("producer.id.expiration.ms"))

	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// Validate checks the typed fields, for a Broker built by hand as well as
// by Load. The error is one line: "key: reason".
func (b *Broker) Validate() error {
	atLeast := func(key string, v, min int64) error {
		if v < min {
			return fmt.Errorf("%s: must be >= %d, got %d", key, min, v)
		}
		return nil
	}
	checks := []error{
		atLeast("broker.id", int64(b.ID), 0),
		atLeast("num.partitions", int64(b.NumPartitions), 1),
		atLeast("default.replication.factor", int64(b.DefaultReplicationFactor), 1),
		atLeast("min.insync.replicas", int64(b.MinInsyncReplicas), 1),
		atLeast("socket.request.max.bytes", int64(b.SocketRequestMaxBytes), 1),
		atLeast("message.max.bytes", int64(b.MessageMaxBytes), 0),
		atLeast("fetch.max.bytes", int64(b.FetchMaxBytes), 1024),
		atLeast("queued.max.requests", int64(b.QueuedMaxRequests), 1),
		atLeast("max.connections", int64(b.MaxConnections), 0),
		atLeast("max.connections.per.ip", int64(b.MaxConnectionsPerIP), 0),
		atLeast("log.retention.check.interval.ms", b.LogRetentionCheckIntervalMs, 1),
		atLeast("zookeeper.session.timeout.ms", int64(b.ZooKeeperSessionTimeoutMs), 1),
		atLeast("replica.lag.time.max.ms", b.ReplicaLagTimeMaxMs, 1),
		atLeast("replica.high.watermark.checkpoint.interval.ms", b.ReplicaHighWatermarkCheckpointIntervalMs, 1),
		atLeast("offsets.topic.num.partitions", int64(b.OffsetsTopicNumPartitions), 1),
		atLeast("offsets.topic.replication.factor", int64(b.OffsetsTopicReplicationFactor), 1),
		atLeast("transaction.state.log.num.partitions", int64(b.TransactionStateLogNumPartitions), 1),
		atLeast("transaction.state.log.replication.factor", int64(b.TransactionStateLogReplication), 1),
		atLeast("transaction.state.log.min.isr", int64(b.TransactionStateLogMinISR), 1),
		atLeast("remote.log.manager.task.interval.ms", b.RemoteLogManagerTaskIntervalMs, 1),
		atLeast("remote.log.storage.lifecycle.margin.ms", b.RemoteLogStorageLifecycleMarginMs, 0),
		atLeast("remote.log.reconciliation.grace.ms", b.RemoteLogReconciliationGraceMs, 0),
		atLeast("remote.log.index.file.cache.total.size.bytes", b.RemoteLogIndexFileCacheTotalSizeBytes, 1),
		atLeast("remote.log.reader.cache.size.bytes", b.RemoteLogReaderCacheSizeBytes, 0),
		atLeast("remote.log.reader.readahead.chunks", int64(b.RemoteLogReaderReadaheadChunks), 0),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if b.DataDir == "" {
		return errors.New("log.dirs: must name a data directory")
	}
	if err := b.validateZooKeeperAuth(); err != nil {
		return err
	}
	if len(b.Listeners) == 0 {
		return errors.New("listeners: must list at least one NAME://HOST:PORT")
	}
	if err := oneOf(ReplicaSelectorClasses...)(b.ReplicaSelectorClass); err != nil {
		return fmt.Errorf("replica.selector.class: %w", err)
	}
	if b.RemoteLogReaderReadaheadChunks > 64 {
		return fmt.Errorf("remote.log.reader.readahead.chunks: must be <= 64, got %d", b.RemoteLogReaderReadaheadChunks)
	}
	if err := reconcileInterval(b.RemoteLogReconciliationIntervalMs); err != nil {
		return fmt.Errorf("remote.log.reconciliation.interval.ms: %w", err)
	}
	if b.QueuedMaxRequestBytes > 0 && b.QueuedMaxRequestBytes < int64(b.SocketRequestMaxBytes) {
		return fmt.Errorf("queued.max.request.bytes: must be <= 0 (no bound) or >= socket.request.max.bytes (%d), got %d",
			b.SocketRequestMaxBytes, b.QueuedMaxRequestBytes)
	}
	if b.MaxConnectionsPerIP == 0 && len(b.MaxConnectionsPerIPOverrides) == 0 {
		return errors.New("max.connections.per.ip: can be 0 only if max.connections.per.ip.overrides is set")
	}
	if b.GroupMinSessionTimeoutMs > b.GroupMaxSessionTimeoutMs {
		return fmt.Errorf("group.min.session.timeout.ms: must be <= group.max.session.timeout.ms (%d), got %d",
			b.GroupMaxSessionTimeoutMs, b.GroupMinSessionTimeoutMs)
	}
	return nil
}

// ParseConnectionOverrides parses max.connections.per.ip.overrides:
// comma-separated HOST:COUNT pairs (the last colon separates the count, so
// IPv6 addresses need no brackets), HOST an IP address or a host name,
// COUNT >= 0. Empty means none.
func ParseConnectionOverrides(s string) (map[string]int32, error) {
	out := map[string]int32{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i <= 0 {
			return nil, fmt.Errorf("%q is not HOST:COUNT", item)
		}
		host := strings.Trim(strings.TrimSpace(item[:i]), "[]")
		n, err := strconv.ParseInt(strings.TrimSpace(item[i+1:]), 10, 32)
		if err != nil || n < 0 || host == "" {
			return nil, fmt.Errorf("%q is not HOST:COUNT with a count >= 0", item)
		}
		out[host] = int32(n)
	}
	return out, nil
}

// ListenAddr is the host:port of the first listener.
func (b *Broker) ListenAddr() string { return b.Listeners[0].Addr() }

// AdvertisedAddr is the host and port published in Metadata for the first
// listener: advertised.listeners if set, else listeners.
func (b *Broker) AdvertisedAddr() (host string, port int32) {
	l := b.AdvertisedListeners[0]
	return l.Host, l.Port
}

// OffsetsReplicationFactor is offsets.topic.replication.factor capped at the
// number of live brokers, so that a single broker can host the offsets
// topic.
func (b *Broker) OffsetsReplicationFactor(brokers int) int16 {
	rf := b.OffsetsTopicReplicationFactor
	if brokers > 0 && int(rf) > brokers {
		rf = int16(brokers)
	}
	return rf
}

// TransactionStateReplicationFactor is
// transaction.state.log.replication.factor capped at the number of
// brokers, and the min.insync.replicas of __transaction_state:
// transaction.state.log.min.isr capped at that factor (so that a cluster
// smaller than the defaults assume can still run transactions; Kafka
// refuses to create the topic then).
func (b *Broker) TransactionStateReplicationFactor(brokers int) (rf int16, minISR int32) {
	rf = b.TransactionStateLogReplication
	if brokers > 0 && int(rf) > brokers {
		rf = int16(brokers)
	}
	return rf, min(b.TransactionStateLogMinISR, int32(rf))
}

// getter reads canonical values with Kafka's defaults; the values were
// validated, so parse errors cannot happen.
type getter struct{ m map[string]string }

func (g getter) raw(key string) (string, bool) {
	if v, ok := g.m[key]; ok {
		return v, true
	}
	if d, ok := BrokerDef(key); ok && d.Default != nil {
		return *d.Default, true
	}
	return "", false
}

func (g getter) str(key string) string { v, _ := g.raw(key); return v }

func (g getter) int(key string) int64 {
	v, _ := g.raw(key)
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n
}

func (g getter) bool(key string) bool {
	v, _ := g.raw(key)
	return strings.EqualFold(strings.TrimSpace(v), "true")
}

func (g getter) list(key string) []string {
	v, _ := g.raw(key)
	l, _ := parseType(List, v)
	return l.([]string)
}

// validateZooKeeperAuth checks the ZooKeeper credentials (never printing
// the password): zookeeper.set.acl needs them, and each needs the other.
func (b *Broker) validateZooKeeperAuth() error {
	user, pass := b.ZooKeeperDigestUser, b.ZooKeeperDigestPassword
	switch {
	case b.ZooKeeperSetACL && user == "" && pass == "":
		return errors.New("zookeeper.set.acl=true needs ZooKeeper credentials: set zookeeper.digest.user and zookeeper.digest.password")
	case user == "" && pass != "":
		return errors.New("zookeeper.digest.password is set without zookeeper.digest.user")
	case user != "" && pass == "":
		return errors.New("zookeeper.digest.user is set without zookeeper.digest.password")
	case strings.ContainsAny(user, ":\n\r"):
		return fmt.Errorf("zookeeper.digest.user %q: must not contain ':' or a line break", user)
	}
	return nil
}
