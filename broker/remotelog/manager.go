package remotelog

// Tiered storage on the broker: the remote segment index under the data
// directory, the uploader loop of partition leaders, and local retention of
// tiered partitions.
//
// With the broker's Options.TierStore set (Options.Store here) and
// remote.log.storage.system.enable=true, the broker opens
// <data-dir>/remote-index (Open) and, every
// remote.log.manager.task.interval.ms, in goroutines of its own (up to
// remote.log.manager.copier.thread.pool.size partitions at once), copies
// the sealed segments of every partition it leads whose topic has
// remote.storage.enable=true and remote.log.copy.disable=false (see
// tier.Uploader). A failing bucket fails that pass only; produce and fetch
// never wait for it.
//
// The index is trusted for a partition only once it has been refreshed
// from the bucket since this broker opened the partition
// (tier.RefreshPartition: a listing of the partition's manifests, reading
// those the index does not already hold finished): by a goroutine of its
// own (warmIndex, a few partitions at a time), then by every tier pass
// (follower.go); at once when this broker leads it or is in its ISR,
// else once it has caught up and joined the ISR, so that a replica new
// to the partition spends nothing on the history in the bucket before
// it is in sync (a follower out of the ISR serves no reads, and its
// local retention waits for its index). Until then its remote reads answer
// REPLICA_NOT_AVAILABLE (RemoteNotReady) and, if it leads with an empty
// log, it restores first (restore.go). A fresh broker thus reads
// the manifests of the partitions it hosts, never the whole bucket's, so
// what it does before serving does not grow with other partitions'
// history; and an index kept from an earlier run costs one listing per
// partition. Writers of a partition's index take the partition's IndexMu.
//
// Local retention of such a partition on its leader follows
// local.retention.ms/bytes (-2: retention.ms/bytes) and deletes a segment
// only once it is wholly uploaded (plog.EnforceTieredRetention); the log
// start offset moves up with the local segments, and consumers read the
// offsets below it from the bucket through the broker's one tier.Reader,
// with its cache and read-ahead (fetch.go); ListOffsets earliest is
// then the remote log start, and ListOffsets by timestamp searches the
// remote segments before the local log. Followers do the same: every pass
// refreshes their index of each tiered partition from the bucket, and
// their local retention deletes only what it holds; a leader refreshes
// once per leader epoch before its first upload, so it never uploads again
// what its predecessor did (follower.go, which also rebuilds a
// follower from the leader's local tail on OFFSET_MOVED_TO_TIERED_STORAGE).
// Topics with remote.log.copy.disable=true keep plain retention.ms/bytes
// locally.
//
// Remote retention (retention.go) runs in the same pass on the
// leader, for topics with remote.storage.enable=true whether copying or
// not (remote.log.copy.disable=true stops uploads only; reads and expiry
// go on): retention.ms, retention.bytes (remote plus not-yet-uploaded
// local bytes) and the log start offset expire remote segments oldest
// first (tier.Uploader.ExpirePartition), and the local log start follows
// the remote log start up. DeleteRecords on a tiered partition may set the
// log start offset below the local log start; it is kept in the remote
// index, fetches below it are OFFSET_OUT_OF_RANGE and ListOffsets earliest
// answers it. It lives in the leader's index only: a new leader (or a
// rebuilt index) starts from its own remote log start.
//
// Switches, with Kafka's rules and messages (config.Resolver.ValidateTopic
// and ValidateTopicUpdate): tiered topics cannot be compacted;
// remote.storage.enable goes from true to false only with
// remote.log.delete.on.disable=true, and then the leader deletes the
// partition's whole remote log (tier.Uploader.DeletePartition) and local
// retention.ms/bytes apply.
//
// Deleting a topic deletes its remote data: when the broker's reconcile
// drops a partition whose topic id is no longer in the metadata (not one
// merely moved to other brokers; ForgetRemoteTopic), the topic is marked
// in the index and every pass runs tier.DeleteTopic for the marked topics until it succeeds.
// Every broker that hosted a replica does this; it is idempotent.
//
// Bucket lifecycle rules and the deletion of orphaned objects run after
// each pass (lifecycle.go).
//
// Metrics (Kafka's BrokerTopicMetrics names): remotecopybytes_total,
// remotecopyrequests_total (segments), remotecopyerrors_total (failed
// partition passes), the gauges remotecopylagbytes and
// remotecopylagsegments (sealed segments below the last stable offset not yet
// copied, after the last pass); remotedeleterequests_total (segment
// deletions started), remotedeleteerrors_total (failed), the gauge
// remotelogsizebytes (remote log bytes of the partitions this broker
// leads, after the last pass), and buildremotelogauxstaterequests_total
// and failedbuildremotelogauxstaterequests_total (follower rebuilds), all
// prefixed kafka_server_brokertopicmetrics_. DescribeLogDirs lists the
// remote tier as a second log dir, and DescribeConfigs of a tiered topic
// adds read-only size entries (see retention.go and docs/protocol.md).
// The remote reader's metrics are described in fetch.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"strata/broker/config"
	"strata/broker/plog"
	"strata/index"
	"strata/tier"
)

// Manager is the broker's tiered storage; the broker holds none when
// tiered storage is off. The methods the broker calls whether tiered
// storage is on or not (settings, the log start, remote reads' checks,
// local retention, DeleteRecords, the size configs, Close) take a nil
// Manager, and then answer as for a partition that is not tiered.
type Manager struct {
	b        Broker
	cfg      *config.Broker
	log      *slog.Logger
	reg      prometheus.Registerer
	ctx      context.Context
	wg       *sync.WaitGroup
	store    tier.ObjectStore
	idx      *index.Index
	uploader *tier.Uploader
	interval time.Duration

	// passMu is held by a tier pass from start to end (tests pause the
	// passes with it).
	passMu sync.Mutex
	// wake starts a pass before the interval is up (Kick).
	wake chan struct{}
	// missingChecks spaces the checks of segments found missing
	// (fetch.go).
	missingChecks missingChecks
	// warnings rate-limits the per-partition warnings of a failing
	// bucket.
	warnings BucketWarnings

	mu       sync.Mutex
	settings map[Partition]Tiering
	// restored: the leader epoch at which a partition's restore last
	// concluded (restore.go), for CheckRestore.
	restored map[Partition]int32
	// fresh: partitions whose index was refreshed from the bucket since
	// this broker opened them (see the file comment).
	fresh map[Partition]bool
	// warmSlots bounds the first refreshes running at once.
	warmSlots chan struct{}

	// Kafka's BrokerTopicMetrics of the copy task.
	copyBytes, copyRequests, copyErrors prometheus.Counter
	copyLagBytes, copyLagSegments       prometheus.Gauge
	copyLagSeconds                      prometheus.Gauge

	read      *tierRead         // the remote reader and its metrics (fetch.go)
	retention *tierRetention    // remote retention and deletions (retention.go)
	follow    tierFollow        // index refresh and follower rebuilds (follower.go)
	house     *tierHousekeeping // lifecycle rules and reconciliation (lifecycle.go)
}

// Tiering is what tiering needs of a partition's topic settings.
type Tiering struct {
	remote              bool // remote.storage.enable
	copyDisable         bool // remote.log.copy.disable
	localRetentionMs    int64
	localRetentionBytes int64
	retentionMs         int64 // retention.ms: remote retention
	retentionBytes      int64 // retention.bytes
	deleteOnDisable     bool  // remote.log.delete.on.disable
}

// Options is what Open needs of the broker.
type Options struct {
	Config   *config.Broker
	Store    tier.ObjectStore // the broker's --tier; nil: none
	Logger   *slog.Logger
	Registry prometheus.Registerer
	Broker   Broker
	// Context is the broker's: cancelled when it stops. WG is the
	// broker's wait group, which the manager's goroutines join.
	Context context.Context
	WG      *sync.WaitGroup
}

// Open opens the remote index when tiered storage is on; it returns nil,
// nil when tiered storage is off.
func Open(o Options) (*Manager, error) {
	cfg, log := o.Config, o.Logger
	if !cfg.RemoteLogStorageSystemEnable {
		if o.Store != nil {
			log.Info("tiered storage off: remote.log.storage.system.enable=false", "tier", o.Store.String())
		}
		return nil, nil
	}
	if o.Store == nil {
		return nil, errors.New("remote.log.storage.system.enable=true needs a tier (--tier)")
	}
	idx, err := index.Open(index.Options{Dir: filepath.Join(cfg.DataDir, "remote-index"), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("remote index: %w", err)
	}
	interval := time.Duration(cfg.RemoteLogManagerTaskIntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = 30 * time.Second
	}
	rm := &Manager{
		b:               o.Broker,
		cfg:             cfg,
		log:             log,
		reg:             o.Registry,
		ctx:             o.Context,
		wg:              o.WG,
		store:           o.Store,
		idx:             idx,
		interval:        interval,
		wake:            make(chan struct{}, 1),
		settings:        map[Partition]Tiering{},
		fresh:           map[Partition]bool{},
		restored:        map[Partition]int32{},
		warmSlots:       make(chan struct{}, warmConcurrency),
		copyBytes:       mRemotecopybytesTotal.NewCounter(),
		copyRequests:    mRemotecopyrequestsTotal.NewCounter(),
		copyErrors:      mRemotecopyerrorsTotal.NewCounter(),
		copyLagBytes:    mRemotecopylagbytes.NewGauge(),
		copyLagSegments: mRemotecopylagsegments.NewGauge(),
		copyLagSeconds:  mCopyLagSeconds.NewGauge(),
	}
	rm.uploader = &tier.Uploader{Store: o.Store, Index: idx, BrokerID: cfg.ID, Logger: log,
		Throttle:    tier.NewThrottle(cfg.RemoteLogManagerCopyMaxBytesPerSecond),
		PeerAlive:   rm.brokerAlive,
		SettleGrace: rm.tierGrace(interval)}
	rm.follow.init(rm.reg)
	rm.reg.MustRegister(rm.copyBytes, rm.copyRequests, rm.copyErrors, rm.copyLagBytes, rm.copyLagSegments, rm.copyLagSeconds)
	if rc, ok := o.Store.(requestCounter); ok {
		rm.reg.MustRegister(bucketCollector{rc}) // metrics.go
	}
	rm.read = rm.newTierRead(o.Store, rm.reg)
	rm.retention = newTierRetention(rm.reg)
	rm.house = rm.newTierHousekeeping()
	return rm, nil
}

// Store is the object store of the remote tier.
func (rm *Manager) Store() tier.ObjectStore { return rm.store }

// Index is the remote segment index.
func (rm *Manager) Index() *index.Index { return rm.idx }

// Warnings rate-limits the warnings of a failing bucket; the broker's
// other users of the bucket (metadata snapshots) share it.
func (rm *Manager) Warnings() *BucketWarnings { return &rm.warnings }

// SetSettings records a partition's topic settings (the broker's reconcile).
func (rm *Manager) SetSettings(p Partition, ts config.TopicSettings) {
	if rm == nil {
		return
	}
	rm.mu.Lock()
	rm.settings[p] = Tiering{
		remote:              ts.RemoteStorageEnable,
		copyDisable:         ts.RemoteLogCopyDisable,
		localRetentionMs:    ts.LocalRetentionMs,
		localRetentionBytes: ts.LocalRetentionBytes,
		retentionMs:         ts.Log.RetentionMs,
		retentionBytes:      ts.Log.RetentionBytes,
		deleteOnDisable:     ts.RemoteLogDeleteOnDisable,
	}
	warm := ts.RemoteStorageEnable && !rm.fresh[p]
	rm.mu.Unlock()
	if warm && !p.Warming().Swap(true) {
		rm.wg.Add(1) // callers run inside the broker's wait group (Start, watchMetadata) or in a connection's handler, which the broker's Close waits for before it
		go rm.warmIndex(p)
	}
}

// warmConcurrency is how many first refreshes of partitions' indexes run
// at once.
const warmConcurrency = 8

// warmIndex gives a tiered partition its first refresh from the bucket
// (see the file comment), again after RebuildBackoff while it fails,
// until it succeeds, the partition is gone or the broker stops.
func (rm *Manager) warmIndex(p Partition) {
	defer rm.wg.Done()
	defer p.Warming().Store(false)
	for {
		rm.mu.Lock()
		_, hosted := rm.settings[p]
		done := rm.fresh[p]
		rm.mu.Unlock()
		if !hosted || done {
			return
		}
		changes := rm.b.Changes() // before looking: no change goes unseen
		if rm.b.CatchingUp(p) {
			select { // catching up: the history waits (see the file comment)
			case <-rm.ctx.Done():
				return
			case <-changes:
			}
			continue
		}
		select {
		case rm.warmSlots <- struct{}{}:
		case <-rm.ctx.Done():
			return
		}
		p.IndexMu().Lock()
		ctx, cancel := context.WithTimeout(rm.ctx, BuildAuxTimeout)
		st, err := tier.RefreshPartition(ctx, rm.store, rm.idx, tierPartition(p))
		cancel()
		p.IndexMu().Unlock()
		<-rm.warmSlots
		if err == nil {
			rm.markFresh(p)
			rm.log.Debug("remote index of partition refreshed", "topic", p.Topic(), "partition", p.Index(), "segments", st.Segments, "read", st.Read)
			return
		}
		if rm.ctx.Err() == nil {
			rm.warnings.Warn(rm.log, "refresh remote index from the bucket; retrying", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
		select {
		case <-rm.ctx.Done():
			return
		case <-time.After(RebuildBackoff):
		}
	}
}

// DropSettings forgets a partition that is closed or deleted.
func (rm *Manager) DropSettings(p Partition) {
	if rm == nil {
		return
	}
	rm.mu.Lock()
	delete(rm.settings, p)
	delete(rm.follow.refreshed, p)
	delete(rm.follow.sinceFull, p)
	delete(rm.fresh, p)
	delete(rm.restored, p)
	rm.mu.Unlock()
}

// tiered returns the partition's settings when this broker copies its
// segments: tiering on, the topic tiered and copying, and the leader.
func (rm *Manager) tiered(p Partition) (Tiering, bool) {
	if rm == nil {
		return Tiering{}, false
	}
	rm.mu.Lock()
	tt, ok := rm.settings[p]
	rm.mu.Unlock()
	return tt, ok && tt.remote && !tt.copyDisable && rm.b.IsLeader(p)
}

func tierPartition(p Partition) index.TopicIDPartition {
	return index.TopicIDPartition{TopicID: index.UUID(p.TopicID()), Partition: p.Index()}
}

// EnforceRetention applies local retention to a partition: tiered
// partitions keep every segment not yet uploaded.
func (rm *Manager) EnforceRetention(p Partition) (int, error) {
	tt, ok := rm.TieredLocal(p) // leader or follower (follower.go)
	if !ok {
		return p.Log().EnforceRetention()
	}
	// Only what the bucket holds without a gap from the local log start
	// on may go (index.ContiguousEnd), not all below the greatest remote
	// end.
	end, have, err := rm.idx.ContiguousEnd(tierPartition(p), p.Log().LogStartOffset())
	if err != nil {
		return 0, fmt.Errorf("remote index: %w", err)
	}
	if !have {
		end = -1
	}
	return p.Log().EnforceTieredRetention(plog.TieredRetention{
		LocalRetentionMs: tt.localRetentionMs, LocalRetentionBytes: tt.localRetentionBytes, RemoteEnd: end,
	})
}

// Run runs the uploader every remote.log.manager.task.interval.ms,
// until the broker's context is done.
func (rm *Manager) Run() {
	rm.probeConditionalWrites()
	t := time.NewTicker(rm.interval)
	defer t.Stop()
	for {
		select {
		case <-rm.ctx.Done():
			return
		case <-t.C:
		case <-rm.wake:
		}
		rm.tierPass()
	}
}

// Kick starts a tier pass soon.
func (rm *Manager) Kick() {
	select {
	case rm.wake <- struct{}{}:
	default:
	}
}

// tierPass refreshes and copies what every tiered partition this broker
// hosts has ready.
func (rm *Manager) tierPass() {
	rm.passMu.Lock()
	defer rm.passMu.Unlock()
	defer rm.tierHousekeeping()
	var lagMu sync.Mutex
	var lagBytes, lagSegments int64
	oldestMs := int64(-1) // max timestamp of the oldest segment waiting
	defer func() {
		rm.copyLagBytes.Set(float64(lagBytes))
		rm.copyLagSegments.Set(float64(lagSegments))
		age := 0.0
		if oldestMs >= 0 {
			age = max(float64(time.Now().UnixMilli()-oldestMs)/1000, 0)
		}
		rm.copyLagSeconds.Set(age)
	}()
	rm.deleteRemoteTopics()
	defer rm.setRemoteLogSize()
	// Partitions go through remote.log.manager.copier.thread.pool.size
	// workers; one partition is only ever in one worker.
	work := make(chan Partition)
	var wg sync.WaitGroup
	for range max(rm.cfg.RemoteLogManagerCopierThreadPoolSize, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				b, n, ts := rm.tierPassPartition(p)
				lagMu.Lock()
				lagBytes += b
				lagSegments += n
				if ts >= 0 && (oldestMs < 0 || ts < oldestMs) {
					oldestMs = ts
				}
				lagMu.Unlock()
			}
		}()
	}
	defer wg.Wait()
	defer close(work)
	for _, p := range rm.b.Partitions() {
		if rm.ctx.Err() != nil {
			return
		}
		work <- p
	}
}

// markFresh records that p's index was refreshed from the bucket since
// this broker opened p.
func (rm *Manager) markFresh(p Partition) {
	rm.mu.Lock()
	if _, hosted := rm.settings[p]; hosted {
		rm.fresh[p] = true
	}
	rm.mu.Unlock()
}

// tierPassPartition is one partition's share of a tier pass: refresh,
// remote retention and copy. It returns the partition's upload lag, and
// the max timestamp of its oldest segment waiting (-1: none).
func (rm *Manager) tierPassPartition(p Partition) (lagBytes, lagSegments, oldestMs int64) {
	oldestMs = -1
	if p.Restoring().Load() {
		return 0, 0, -1 // its restore goroutine has it (restore.go)
	}
	p.IndexMu().Lock()
	defer p.IndexMu().Unlock()
	mayCopy := rm.tierRefresh(p) // refreshes followed partitions, and led ones once per epoch (follower.go)
	rm.expireRemote(p)
	if _, ok := rm.TieredLocal(p); ok {
		rm.b.RollForUpload(p) // the broker's drain.go: leaders and caught-up followers alike
	}
	if _, ok := rm.tiered(p); !ok || !mayCopy {
		return 0, 0, -1
	}
	// Only below the last stable offset: no record of an undecided
	// transaction reaches the bucket (it is the high watermark when no
	// transaction is open).
	lso := p.Log().LastStableOffset(p.HW())
	lead, ctx, stop := rm.copyLeadership(p)
	st, err := rm.uploader.CopyPartition(ctx, tierPartition(p), p.Topic(), p.Log(), lso, lead)
	stop()
	rm.copyBytes.Add(float64(st.Bytes))
	rm.copyRequests.Add(float64(st.Copied))
	switch {
	case errors.Is(err, tier.ErrNotLeading):
		rm.log.Info("stopped copying to remote storage: fenced", "topic", p.Topic(), "partition", p.Index(), "leader_epoch", lead.Epoch, "reason", err)
	case err != nil:
		rm.copyErrors.Inc()
		if rm.ctx.Err() == nil {
			rm.warnings.Warn(rm.log, "copy segments to remote storage; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
	case st.Unsettled > 0:
		rm.log.Info("waiting for another broker's unfinished uploads before copying", "topic", p.Topic(), "partition", p.Index(), "uploads", st.Unsettled)
	}
	if end, ok, err := rm.idx.LogEnd(tierPartition(p)); err == nil {
		if !ok {
			end = -1
		}
		for _, seg := range p.Log().Segments() {
			if seg.Sealed && seg.NextOffset <= lso && seg.NextOffset-1 > end {
				lagBytes += seg.Size
				lagSegments++
				if oldestMs < 0 && seg.MaxTimestamp >= 0 {
					oldestMs = seg.MaxTimestamp
				}
			}
		}
	}
	if st.Copied > 0 || st.Finished > 0 || st.Abandoned > 0 {
		rm.log.Info("copied segments to remote storage", "topic", p.Topic(), "partition", p.Index(),
			"segments", st.Copied, "bytes", st.Bytes, "finished", st.Finished, "cleaned_up", st.Abandoned)
	}
	return lagBytes, lagSegments, oldestMs
}

// leadershipPoll is how often a copy pass checks that its broker still leads
// the partition at the pass's epoch.
const leadershipPoll = 50 * time.Millisecond

// copyLeadership is the leadership a copy pass of p runs under: this
// broker leads p at its current epoch. The context is cancelled as soon as
// that stops holding, which stops the pass's uploads (Kafka's
// RemoteLogManager cancels a partition's copy task when the broker stops
// leading it); stop releases it.
func (rm *Manager) copyLeadership(p Partition) (tier.Leadership, context.Context, func()) {
	epoch := p.LeaderEpoch()
	leading := func() bool { return rm.b.IsLeader(p) && p.LeaderEpoch() == epoch }
	ctx, cancel := context.WithCancel(rm.ctx)
	go func() {
		t := time.NewTicker(leadershipPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !leading() {
					cancel()
					return
				}
			}
		}
	}()
	return tier.Leadership{Epoch: epoch, Leading: leading}, ctx, cancel
}

// brokerAlive reports whether broker id is registered in the cluster.
func (rm *Manager) brokerAlive(id int32) bool {
	_, ok := rm.b.Metadata().Broker(id)
	return ok
}

// tierGrace is how long an upload or an orphaned object is given before
// another broker may delete it: remote.log.reconciliation.grace.ms, but at
// least ten task intervals.
func (rm *Manager) tierGrace(interval time.Duration) time.Duration {
	return max(time.Duration(rm.cfg.RemoteLogReconciliationGraceMs)*time.Millisecond, 10*interval)
}

// Close closes the reader and the index once the loop has stopped.
func (rm *Manager) Close() error {
	if rm == nil {
		return nil
	}
	rm.read.reader.Close()
	return rm.idx.Close()
}

// BucketWarnings rate-limits warnings that every partition repeats when
// the bucket is down: the first of a kind in a minute is logged, the
// others of that minute at debug, and the next one logged says how many
// there were.
type BucketWarnings struct {
	mu    sync.Mutex
	kinds map[string]*bucketWarning
}

type bucketWarning struct {
	logged     time.Time
	suppressed int
}

const bucketWarnEvery = time.Minute

// warn logs msg as a warning, at most once a minute per msg.
func (w *BucketWarnings) Warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now()
	w.mu.Lock()
	if w.kinds == nil {
		w.kinds = map[string]*bucketWarning{}
	}
	k := w.kinds[msg]
	if k == nil {
		k = &bucketWarning{}
		w.kinds[msg] = k
	}
	loud := now.Sub(k.logged) >= bucketWarnEvery
	suppressed := k.suppressed
	if loud {
		k.logged, k.suppressed = now, 0
	} else {
		k.suppressed++
	}
	w.mu.Unlock()
	if !loud {
		log.Debug(msg, args...)
		return
	}
	if suppressed > 0 {
		args = append(args, "similar_warnings_in_the_last_minute", suppressed)
	}
	log.Warn(msg, args...)
}

// probeConditionalWrites checks once, at start, that the store honours
// the conditional writes that fence uploads and snapshots
// (tier.ProbeConditionalWrites), and says what is at stake when it does
// not: a store that ignores them (WARN) leaves only the upload
// heartbeat's lease, a check followed by a write, which a broker frozen
// between the two defeats; one that refuses them (ERROR) fails every
// upload and snapshot write.
func (rm *Manager) probeConditionalWrites() {
	ctx, cancel := context.WithTimeout(rm.ctx, 30*time.Second)
	defer cancel()
	err := tier.ProbeConditionalWrites(ctx, rm.store)
	switch {
	case err == nil:
		rm.log.Debug("the object store honours conditional writes", "tier", rm.store.String())
	case errors.Is(err, tier.ErrNoConditionalWrites):
		rm.log.Warn("the object store does not honour conditional writes (If-None-Match, If-Match): a broker frozen in the middle of an upload may still write it over the new leader's cleanup; use a store that has them (AWS S3, MinIO, and most S3-compatible stores since 2024)", "tier", rm.store.String())
	case errors.Is(err, tier.ErrConditionalWritesRefused):
		rm.log.Error("the object store refuses conditional writes (If-None-Match, If-Match), which fence uploads and the metadata snapshots: uploads, their cleanups and snapshot writes fail on it; use a store that has them (AWS S3, MinIO, and most S3-compatible stores since 2024)", "tier", rm.store.String(), "err", err)
	case rm.ctx.Err() == nil:
		rm.log.Warn("could not check whether the object store honours conditional writes", "tier", rm.store.String(), "err", err)
	}
}
