package group

import (
	"errors"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/config"
)

// Config configures a Coordinator. Durations are Kafka's millisecond
// settings.
type Config struct {
	NumPartitions            int32 // offsets.topic.num.partitions
	GroupMaxSize             int32 // group.max.size
	MinSessionTimeoutMs      int32 // group.min.session.timeout.ms
	MaxSessionTimeoutMs      int32 // group.max.session.timeout.ms
	InitialRebalanceDelayMs  int32 // group.initial.rebalance.delay.ms
	OffsetsRetentionMs       int64 // offsets.retention.minutes
	RetentionCheckIntervalMs int64 // offsets.retention.check.interval.ms
	MetadataMaxBytes         int32 // offset.metadata.max.bytes

	// PartitionExists tells whether a topic partition exists; OffsetCommit
	// and OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION otherwise. Nil
	// means every partition exists.
	PartitionExists func(topic string, partition int32) bool

	// Broker is the broker configuration, for KIP-848 group settings.
	Broker *config.Broker
	// Modern plugs in KIP-848 consumer groups; zero value = none.
	Modern ModernHooks
	Logger *slog.Logger
}

// ConfigFromBroker fills a Config from the broker's settings.
func ConfigFromBroker(b *config.Broker) Config {
	return Config{
		NumPartitions:            b.OffsetsTopicNumPartitions,
		GroupMaxSize:             b.GroupMaxSize,
		MinSessionTimeoutMs:      b.GroupMinSessionTimeoutMs,
		MaxSessionTimeoutMs:      b.GroupMaxSessionTimeoutMs,
		InitialRebalanceDelayMs:  b.GroupInitialRebalanceDelayMs,
		OffsetsRetentionMs:       int64(b.OffsetsRetentionMinutes) * 60_000,
		RetentionCheckIntervalMs: b.OffsetsRetentionCheckIntervalMs,
		MetadataMaxBytes:         b.OffsetMetadataMaxBytes,
		Broker:                   b,
	}
}

// Log is the coordinator's view of one __consumer_offsets partition this
// broker leads.
type Log interface {
	// Append writes one record batch and returns the offset one past it.
	// It is called with the partition's lock held and must not wait for
	// replication.
	Append(batch []byte) (end int64, err error)
	// WaitDurable returns once every offset below end is durable on the
	// terms of an acks=-1 produce, or with the reason it cannot be.
	WaitDurable(end int64) error
	// Replay calls fn with chunks of whole record batches from the log
	// start up to the log end offset at the time of the call, in order,
	// once all of them are committed (below the high watermark).
	Replay(fn func(batches []byte) error) error
}

// Coordinator is the group coordinator of one broker: a shard per
// __consumer_offsets partition it leads.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu     sync.RWMutex
	shards map[int32]*shard
	closed bool
	nparts int32 // partitions of __consumer_offsets; guarded by mu

	done chan struct{}
	wg   sync.WaitGroup
}

// New returns a running Coordinator leading no partition yet.
func New(cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 50
	}
	if cfg.GroupMaxSize <= 0 {
		cfg.GroupMaxSize = 1<<31 - 1
	}
	if cfg.MaxSessionTimeoutMs == 0 {
		cfg.MinSessionTimeoutMs, cfg.MaxSessionTimeoutMs = 6000, 1800000
	}
	if cfg.OffsetsRetentionMs <= 0 {
		cfg.OffsetsRetentionMs = 7 * 24 * 3600 * 1000
	}
	if cfg.RetentionCheckIntervalMs <= 0 {
		cfg.RetentionCheckIntervalMs = 600000
	}
	if cfg.MetadataMaxBytes <= 0 {
		cfg.MetadataMaxBytes = 4096
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, shards: map[int32]*shard{}, nparts: cfg.NumPartitions, done: make(chan struct{})}
	c.wg.Add(1)
	go c.retentionLoop()
	return c
}

// BrokerConfig is the broker configuration (for KIP-848 settings).
func (c *Coordinator) BrokerConfig() *config.Broker { return c.cfg.Broker }

// PartitionFor is the __consumer_offsets partition of a group: Kafka's
// Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	c.mu.RLock()
	n := c.nparts
	c.mu.RUnlock()
	return PartitionFor(groupID, n)
}

// SetNumPartitions sets the partition count of __consumer_offsets when
// the topic exists with a count other than offsets.topic.num.partitions.
func (c *Coordinator) SetNumPartitions(n int32) {
	if n > 0 {
		c.mu.Lock()
		c.nparts = n
		c.mu.Unlock()
	}
}

// PartitionFor is Kafka's partition of groupID among n partitions.
func PartitionFor(groupID string, n int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// Elect makes this coordinator the owner of an offsets partition and
// loads it in the background; until loaded its groups answer
// COORDINATOR_LOAD_IN_PROGRESS. Electing a partition already owned is a
// no-op.
func (c *Coordinator) Elect(partition int32, l Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.shards[partition] != nil {
		return
	}
	s := newShard(c, partition, l)
	c.shards[partition] = s
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		s.load()
	}()
}

// Resign drops an offsets partition: its groups are unloaded and waiting
// requests are answered NOT_COORDINATOR.
func (c *Coordinator) Resign(partition int32) {
	c.mu.Lock()
	s := c.shards[partition]
	delete(c.shards, partition)
	c.mu.Unlock()
	if s != nil {
		s.unload()
	}
}

// Owned lists the partitions this coordinator owns, sorted.
func (c *Coordinator) Owned() []int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]int32, 0, len(c.shards))
	for p := range c.shards {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Close resigns every partition and stops the background work.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	shards := c.shards
	c.shards = map[int32]*shard{}
	close(c.done)
	c.mu.Unlock()
	for _, s := range shards {
		s.unload()
	}
	c.wg.Wait()
}

// lockShard returns the loaded shard of groupID, locked, or the error
// code Kafka answers when this broker cannot serve the group.
func (c *Coordinator) lockShard(groupID string) (*shard, int16) {
	c.mu.RLock()
	s, closed := c.shards[PartitionFor(groupID, c.nparts)], c.closed
	c.mu.RUnlock()
	switch {
	case closed:
		return nil, codeCoordinatorNotAvailable
	case s == nil:
		return nil, codeNotCoordinator
	}
	s.mu.Lock()
	switch {
	case s.gone:
		s.mu.Unlock()
		return nil, codeNotCoordinator
	case !s.loaded:
		s.mu.Unlock()
		return nil, codeCoordinatorLoadInProgress
	}
	return s, 0
}

func (c *Coordinator) allShards() []*shard {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		out = append(out, s)
	}
	return out
}

// anyLoading tells whether a partition is still loading (ListGroups).
func (c *Coordinator) anyLoading() bool {
	for _, s := range c.allShards() {
		s.mu.Lock()
		l := !s.loaded && !s.gone
		s.mu.Unlock()
		if l {
			return true
		}
	}
	return false
}

func (c *Coordinator) retentionLoop() {
	defer c.wg.Done()
	t := time.NewTicker(time.Duration(c.cfg.RetentionCheckIntervalMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.ExpireOffsets()
		}
	}
}

// ExpireOffsets runs one retention pass over every loaded partition
// (the periodic task calls it every offsets.retention.check.interval.ms).
func (c *Coordinator) ExpireOffsets() {
	for _, s := range c.allShards() {
		s.expireOffsets()
	}
}

// appendErrCode maps a failed append to the code Kafka answers.
func appendErrCode(err error, commit bool) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return codeNotCoordinator
		case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
			if commit {
				return kerr.InvalidCommitOffsetSize.Code
			}
			return codeUnknownServerError
		}
	}
	return codeCoordinatorNotAvailable
}

func nowMs() int64 { return time.Now().UnixMilli() }

// PartitionOffsets returns a copy of the committed offsets of the groups
// of an offsets partition this coordinator owns, by group; false while
// the partition is loading or not owned.
func (c *Coordinator) PartitionOffsets(partition int32) (map[string]map[TopicPartition]OffsetEntry, bool) {
	c.mu.RLock()
	s := c.shards[partition]
	c.mu.RUnlock()
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded || s.gone {
		return nil, false
	}
	out := make(map[string]map[TopicPartition]OffsetEntry, len(s.offsets))
	for g, m := range s.offsets {
		if len(m) > 0 {
			out[g] = maps.Clone(m)
		}
	}
	return out, true
}

// NumGroups counts the groups of the loaded partitions this coordinator
// owns: classic and KIP-848 groups, and groups known only by their
// committed offsets (Kafka's GroupMetadataManager NumGroups).
func (c *Coordinator) NumGroups() int {
	n := 0
	for _, s := range c.allShards() {
		s.mu.Lock()
		if s.loaded && !s.gone {
			for g := range s.groups {
				if s.modern[g] == nil {
					n++
				}
			}
			n += len(s.modern)
			for g := range s.offsets {
				if s.groups[g] == nil && s.modern[g] == nil && len(s.offsets[g]) > 0 {
					n++
				}
			}
		}
		s.mu.Unlock()
	}
	return n
}
