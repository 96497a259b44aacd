package broker

// The broker's side of tiered storage (strata/broker/remotelog, Kafka's
// RemoteLogManager): the Server's handle on the remotelog.Manager, the
// adapters through which the manager sees the broker's partitions and the
// broker itself, and the Server methods that the rest of the broker calls,
// thin wrappers over the manager's.

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/config"
	"strata/broker/plog"
	"strata/broker/remotelog"
	"strata/controller"
	"strata/index"
	"strata/tier"
)

// tierState is the broker's tiered storage: the manager, with the object
// store, the remote index and the bucket warnings at hand for the
// broker's other users of the bucket (metadata snapshots, DescribeLogDirs,
// the replica fetcher). nil when tiered storage is off.
type tierState struct {
	*remotelog.Manager
	store    tier.ObjectStore
	idx      *index.Index
	warnings bucketWarnings
}

// bucketWarnings rate-limits the warnings of a failing bucket
// (remotelog.BucketWarnings).
type bucketWarnings struct{ w *remotelog.BucketWarnings }

func (w bucketWarnings) warn(log *slog.Logger, msg string, args ...any) { w.w.Warn(log, msg, args...) }

// tierPart is a partition as the manager sees it. It is a comparable
// value: the manager keys its maps by it.
type tierPart struct{ p *partition }

func (t tierPart) Log() *plog.Log          { return t.p.Log() }
func (t tierPart) Topic() string           { return t.p.Topic() }
func (t tierPart) Index() int32            { return t.p.Index() }
func (t tierPart) TopicID() [16]byte       { return t.p.TopicID() }
func (t tierPart) LeaderEpoch() int32      { return t.p.LeaderEpoch() }
func (t tierPart) HW() int64               { return t.p.HW() }
func (t tierPart) StoreHW(hw int64)        { t.p.StoreHW(hw) }
func (t tierPart) AdvanceHW(hw int64)      { t.p.AdvanceHW(hw) }
func (t tierPart) Restoring() *atomic.Bool { return &t.p.Restoring }
func (t tierPart) IndexMu() *sync.Mutex    { return &t.p.IndexMu }
func (t tierPart) Warming() *atomic.Bool   { return &t.p.Warming }

// tierBroker is the broker as the manager sees it.
type tierBroker struct{ s *Server }

func (b tierBroker) Partitions() []remotelog.Partition {
	ps := b.s.allPartitions()
	out := make([]remotelog.Partition, len(ps))
	for i, p := range ps {
		out[i] = tierPart{p}
	}
	return out
}

func (b tierBroker) Partition(topic string, index int32) remotelog.Partition {
	if p := b.s.partition(topic, index); p != nil {
		return tierPart{p}
	}
	return nil
}

func (b tierBroker) IsLeader(p remotelog.Partition) bool   { return b.s.isLeader(p.(tierPart).p) }
func (b tierBroker) CatchingUp(p remotelog.Partition) bool { return b.s.catchingUp(p.(tierPart).p) }
func (b tierBroker) Metadata() *controller.Metadata        { return b.s.ctrl.Metadata() }
func (b tierBroker) Changes() <-chan struct{}              { return b.s.ctrl.Changes() }
func (b tierBroker) RollForUpload(p remotelog.Partition)   { b.s.rollForUpload(p.(tierPart).p) }

func (b tierBroker) Resolver(md *controller.Metadata) config.Resolver { return b.s.resolver(md) }

// openTier opens the remote index when tiered storage is on.
func (s *Server) openTier() error {
	m, err := remotelog.Open(remotelog.Options{
		Config:   s.cfg,
		Store:    s.opts.TierStore,
		Logger:   s.log,
		Registry: s.metrics.reg,
		Broker:   tierBroker{s},
		Context:  s.ctx,
		WG:       &s.wg,
	})
	if err != nil || m == nil {
		return err
	}
	s.tier = &tierState{Manager: m, store: m.Store(), idx: m.Index(), warnings: bucketWarnings{m.Warnings()}}
	return nil
}

// rlm is the remote log manager, nil when tiered storage is off; the
// manager's methods that the broker calls either way take a nil one.
func (s *Server) rlm() *remotelog.Manager {
	if s.tier == nil {
		return nil
	}
	return s.tier.Manager
}

func tierPartition(p *partition) index.TopicIDPartition {
	return index.TopicIDPartition{TopicID: index.UUID(p.TopicID()), Partition: p.Index()}
}

// setTierSettings records a partition's topic settings (reconcile).
func (s *Server) setTierSettings(p *partition, ts config.TopicSettings) {
	s.rlm().SetSettings(tierPart{p}, ts)
}

// dropTierSettings forgets a partition that is closed or deleted.
func (s *Server) dropTierSettings(p *partition) { s.rlm().DropSettings(tierPart{p}) }

// enforceRetention applies local retention to a partition: tiered
// partitions keep every segment not yet uploaded.
func (s *Server) enforceRetention(p *partition) (int, error) {
	return s.rlm().EnforceRetention(tierPart{p})
}

// tierLoop runs the uploader every remote.log.manager.task.interval.ms.
func (s *Server) tierLoop() {
	defer s.wg.Done()
	s.tier.Run()
}

// kickTier starts a tier pass soon.
func (s *Server) kickTier() { s.tier.Kick() }

// closeTier closes the reader and the index once the loop has stopped.
func (s *Server) closeTier() error { return s.rlm().Close() }

// tierSettings returns the partition's tier settings, if tiering is on
// and its topic is known.
func (s *Server) tierSettings(p *partition) (remotelog.Tiering, bool) {
	return s.rlm().Settings(tierPart{p})
}

// tieredLocal returns the settings of a partition whose local retention
// follows local.retention.*: its topic is tiered and copying.
func (s *Server) tieredLocal(p *partition) (remotelog.Tiering, bool) {
	return s.rlm().TieredLocal(tierPart{p})
}

// remoteReadable reports whether the partition's topic is tiered
// (remote.storage.enable=true) on a broker with tiered storage on.
func (s *Server) remoteReadable(p *partition) bool { return s.rlm().RemoteReadable(tierPart{p}) }

// remoteNotReady reports whether the partition is tiered while its index
// is still to be refreshed from the bucket.
func (s *Server) remoteNotReady(p *partition) bool { return s.rlm().RemoteNotReady(tierPart{p}) }

// remoteLogStart is the partition's remote log start, if it has one, or
// the log start offset DeleteRecords set when that is higher.
func (s *Server) remoteLogStart(p *partition) (int64, bool) {
	return s.rlm().RemoteLogStart(tierPart{p})
}

// globalLogStart is the partition's log start offset as Kafka's leader
// tells its followers.
func (s *Server) globalLogStart(p *partition) int64 { return s.rlm().GlobalLogStart(tierPart{p}) }

// logStart is the partition's log start offset: the local log start, or
// the remote log start when that is lower (a tiered partition).
func (s *Server) logStart(p *partition) int64 { return s.rlm().LogStart(tierPart{p}) }

// readRemote serves a fetch at offset from the bucket: the records, pinned
// until released, or ok=false when the remote log does not hold offset,
// or an error code.
func (s *Server) readRemote(p *partition, offset int64, maxBytes int) (recs tier.Pinned, ok bool, code int16) {
	return s.tier.ReadRemote(tierPart{p}, offset, maxBytes)
}

// abortedTransactions returns the aborted transactions overlapping
// [from, upper) of p for a read_committed fetch, from the bucket and the
// local log (remotelog.Manager.AbortedTransactions; the local log alone
// when tiered storage is off), or an error code.
func (s *Server) abortedTransactions(p *partition, from, upper int64) ([]plog.AbortedTxn, int16) {
	return s.rlm().AbortedTransactions(tierPart{p}, from, upper)
}

// fetchRemote does the remote reads a fetch's evaluation left, one
// goroutine per partition.
func (s *Server) fetchRemote(results []fetchResult) {
	var wg sync.WaitGroup
	for i := range results {
		r := &results[i]
		if !r.remote {
			continue
		}
		p := s.partition(r.t.key.topic, r.t.key.part)
		if p == nil {
			r.code = kerr.NotLeaderForPartition.Code
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, ok, code := s.readRemote(p, r.t.fetchOffset, r.remoteLimit)
			switch {
			case code != 0:
				r.code = code
			case !ok: // deleted from the bucket meanwhile
				r.code = kerr.OffsetOutOfRange.Code
			default:
				r.records = recs
			}
		}()
	}
	wg.Wait()
}

// remoteLogEnd is the last offset of the partition's uploaded segments
// and its leader epoch, if it has any (ListOffsets LATEST_TIERED).
func (s *Server) remoteLogEnd(p *partition) (end int64, epoch int32, ok bool) {
	return s.rlm().RemoteLogEnd(tierPart{p})
}

// remoteOffsetForTimestamp is the remote part of ListOffsets by timestamp.
func (s *Server) remoteOffsetForTimestamp(p *partition, ts int64, mem plog.Memory) (off, rts int64, epoch int32, found bool, code int16) {
	return s.rlm().RemoteOffsetForTimestampCharged(tierPart{p}, ts, mem)
}

// markRestore marks p, which this broker is about to lead, as restoring
// when it is tiered and its local log is empty. Called by applyRole.
func (s *Server) markRestore(p *partition) { s.rlm().MarkRestore(tierPart{p}) }

// movedToTier reports whether a replica's fetch at offset below the
// local log start of p is to be answered OFFSET_MOVED_TO_TIERED_STORAGE.
func (s *Server) movedToTier(p *partition, offset int64) bool {
	return s.rlm().MovedToTier(tierPart{p}, offset)
}

// forgetRemoteTopic is called by reconcile for a partition it closes and
// deletes locally; the remote data of a deleted topic is deleted.
func (s *Server) forgetRemoteTopic(p *partition, md *controller.Metadata) {
	s.rlm().ForgetRemoteTopic(tierPart{p}, md)
}

// deleteRecords is DeleteRecords on the leader. It returns the new low
// watermark.
func (s *Server) deleteRecords(p *partition, off int64) (int64, error) {
	return s.rlm().DeleteRecords(tierPart{p}, off)
}

// tierSizeConfigs are the read-only size entries of a tiered topic's
// DescribeConfigs on this broker.
func (s *Server) tierSizeConfigs(t *controller.Topic, o config.DescribeOptions) []kmsgConfig {
	return s.rlm().SizeConfigs(t, o)
}
