package txn

import (
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/config"
)

// Kafka's error codes the coordinator answers with.
var (
	codeNone                     int16 = 0
	codeUnknownServerError             = kerr.UnknownServerError.Code
	codeLoadInProgress                 = kerr.CoordinatorLoadInProgress.Code
	codeNotAvailable                   = kerr.CoordinatorNotAvailable.Code
	codeNotCoordinator                 = kerr.NotCoordinator.Code
	codeInvalidRequest                 = kerr.InvalidRequest.Code
	codeInvalidTimeout                 = kerr.InvalidTransactionTimeout.Code
	codeConcurrentTransactions         = kerr.ConcurrentTransactions.Code
	codeProducerFenced                 = kerr.ProducerFenced.Code
	codeInvalidProducerIDMapping       = kerr.InvalidProducerIDMapping.Code
	codeInvalidTxnState                = kerr.InvalidTxnState.Code
	codeTransactionAbortable           = kerr.TransactionAbortable.Code
	codeTransactionalIDNotFound        = kerr.TransactionalIDNotFound.Code
)

// Config configures a Coordinator. Durations are Kafka's millisecond
// settings.
type Config struct {
	NumPartitions               int32 // transaction.state.log.num.partitions
	MaxTimeoutMs                int32 // transaction.max.timeout.ms
	TransactionalIDExpirationMs int64 // transactional.id.expiration.ms
	// transaction.abort.timed.out.transaction.cleanup.interval.ms and
	// transaction.remove.expired.transaction.cleanup.interval.ms.
	AbortTimedOutIntervalMs int64
	RemoveExpiredIntervalMs int64
	// TransactionVersion is the cluster's transaction.version feature
	// level (0, 1 or 2): the value version written (v1 from level 1) and
	// the version of the aborts the coordinator starts itself (timeouts,
	// fencing).
	TransactionVersion int16

	// NextProducerID hands out a producer id unique in the cluster (the
	// broker's allocator, shared with idempotent producers).
	NextProducerID func() (int64, error)
	// OffsetsPartitionFor is the __consumer_offsets partition of a group
	// (AddOffsetsToTxn); nil: Kafka's hash over 50 partitions.
	OffsetsPartitionFor func(groupID string) int32
	// SendMarkers is called, with no lock held, for each transaction whose
	// markers are due: after EndTxn's PrepareCommit/PrepareAbort is
	// durable, after an abort the coordinator started, and for every
	// prepared transaction found when a partition is loaded. It runs on
	// the requester's goroutine and must not block (queue the markers).
	// Whoever writes the markers calls CompleteTxn once all are written.
	SendMarkers func(Markers)
	// RefuseNewTransactions, when set and true, makes AddPartitions
	// answer CONCURRENT_TRANSACTIONS (which clients retry) instead of
	// starting a transaction; transactions already open go on and may
	// end. The broker sets it while the cluster drains for scale to zero,
	// so that the open transactions the drain waits for can only go down.
	RefuseNewTransactions func() bool
	// Now is the clock (tests); nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// ConfigFromBroker fills a Config from the broker's settings.
func ConfigFromBroker(b *config.Broker) Config {
	return Config{
		NumPartitions:               b.TransactionStateLogNumPartitions,
		MaxTimeoutMs:                b.TransactionMaxTimeoutMs,
		TransactionalIDExpirationMs: int64(b.TransactionalIDExpirationMs),
		AbortTimedOutIntervalMs:     b.TransactionAbortTimedOutIntervalMs,
		RemoveExpiredIntervalMs:     b.TransactionRemoveExpiredIntervalMs,
		TransactionVersion:          2,
	}
}

// Log is the coordinator's view of one __transaction_state partition this
// broker leads; the same contract as the group coordinator's Log.
type Log interface {
	// Append writes one record batch and returns the offset one past it.
	// It is called with the shard's lock held and must not wait for
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

// Coordinator is the transaction coordinator of one broker: a shard per
// __transaction_state partition it leads.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu     sync.RWMutex
	shards map[int32]*shard
	closed bool
	nparts int32

	done chan struct{}
	wg   sync.WaitGroup
}

// New returns a running Coordinator leading no partition yet. Its
// background task aborts timed-out transactions and expires idle
// transactional ids at the configured intervals.
func New(cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 50
	}
	if cfg.MaxTimeoutMs <= 0 {
		cfg.MaxTimeoutMs = 900000
	}
	if cfg.TransactionalIDExpirationMs <= 0 {
		cfg.TransactionalIDExpirationMs = 604800000
	}
	if cfg.AbortTimedOutIntervalMs <= 0 {
		cfg.AbortTimedOutIntervalMs = 10000
	}
	if cfg.RemoveExpiredIntervalMs <= 0 {
		cfg.RemoveExpiredIntervalMs = 3600000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OffsetsPartitionFor == nil {
		cfg.OffsetsPartitionFor = func(g string) int32 { return PartitionFor(g, 50) }
	}
	if cfg.NextProducerID == nil {
		cfg.NextProducerID = func() (int64, error) { return 0, errors.New("no producer id allocator") }
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, shards: map[int32]*shard{}, nparts: cfg.NumPartitions, done: make(chan struct{})}
	c.wg.Add(1)
	go c.cleanupLoop()
	return c
}

// PartitionFor is Kafka's partition of a transactional id among n
// partitions: Utils.abs(transactionalId.hashCode()) % n, with Java's
// String.hashCode over UTF-16 code units.
func PartitionFor(transactionalID string, n int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(transactionalID)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// PartitionFor is the __transaction_state partition of a transactional id.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return PartitionFor(transactionalID, c.nparts)
}

// SetNumPartitions sets the partition count of __transaction_state when
// the topic exists with another count than configured.
func (c *Coordinator) SetNumPartitions(n int32) {
	if n > 0 {
		c.mu.Lock()
		c.nparts = n
		c.mu.Unlock()
	}
}

// Elect makes this coordinator the owner of a __transaction_state
// partition at a leader epoch (the coordinator epoch of its markers) and
// loads it in the background; until loaded its transactional ids answer
// COORDINATOR_LOAD_IN_PROGRESS. Electing a partition already owned is a
// no-op.
func (c *Coordinator) Elect(partition, epoch int32, l Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.shards[partition] != nil {
		return
	}
	s := newShard(c, partition, epoch, l)
	c.shards[partition] = s
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		s.load()
	}()
}

// Resign drops a partition: its transactional ids answer NOT_COORDINATOR,
// and writes in flight are not applied.
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

// Loaded tells whether a partition is owned and loaded.
func (c *Coordinator) Loaded(partition int32) bool {
	c.mu.RLock()
	s := c.shards[partition]
	c.mu.RUnlock()
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded && !s.gone
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

// lockShard returns the loaded shard of a transactional id, locked, or
// the code Kafka answers when this broker cannot serve it.
func (c *Coordinator) lockShard(transactionalID string) (*shard, int16) {
	c.mu.RLock()
	s, closed := c.shards[PartitionFor(transactionalID, c.nparts)], c.closed
	c.mu.RUnlock()
	switch {
	case closed:
		return nil, codeNotAvailable
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
		return nil, codeLoadInProgress
	}
	return s, codeNone
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

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// validTimeout is Kafka's check of a requested transaction.timeout.ms.
func (c *Coordinator) validTimeout(ms int32) bool { return ms > 0 && ms <= c.cfg.MaxTimeoutMs }

// sendMarkers hands markers to the writer; called with no lock held.
func (c *Coordinator) sendMarkers(ms ...Markers) {
	if c.cfg.SendMarkers == nil {
		return
	}
	for _, m := range ms {
		c.cfg.SendMarkers(m)
	}
}

// writeErrCode maps a failed write of a transition to the code Kafka
// answers (TransactionStateManager.appendTransactionToLog).
func writeErrCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError, kerr.NotCoordinator:
			return codeNotCoordinator
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return codeUnknownServerError
		}
	}
	return codeNotAvailable
}

func (c *Coordinator) cleanupLoop() {
	defer c.wg.Done()
	abort := time.NewTicker(time.Duration(c.cfg.AbortTimedOutIntervalMs) * time.Millisecond)
	defer abort.Stop()
	expire := time.NewTicker(time.Duration(c.cfg.RemoveExpiredIntervalMs) * time.Millisecond)
	defer expire.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-abort.C:
			c.AbortTimedOut()
		case <-expire.C:
			c.ExpireTransactionalIDs()
		}
	}
}
