package remotelog

// Remote retention on the partition leader, the remote data of deleted
// topics, remote.storage.enable turned off with
// remote.log.delete.on.disable=true, DeleteRecords of tiered partitions,
// and remote sizes (see the doc comment of manager.go).

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
	"strata/index"
	"strata/tier"
)

// tierRetention is the broker's state of remote retention.
type tierRetention struct {
	// Kafka's BrokerTopicMetrics of the expiration task.
	deleteRequests, deleteErrors prometheus.Counter
	logSize                      prometheus.Gauge

	mu           sync.Mutex
	disabledDone map[Partition]bool // remote data deleted after remote.storage.enable=false
	passSize     int64              // remote log bytes of the partitions led, this pass
	// deleting holds tiered topics of which a partition vanished from the
	// metadata while the topic is still there: a deletion under way
	// (ZooKeeper mode removes a deleted topic partition by partition). The
	// pass marks them deleted once the topic id is gone.
	deleting map[[16]byte]string
}

func newTierRetention(reg prometheus.Registerer) *tierRetention {
	r := &tierRetention{
		deleteRequests: mRemotedeleterequestsTotal.NewCounter(),
		deleteErrors:   mRemotedeleteerrorsTotal.NewCounter(),
		logSize:        mRemotelogsizebytes.NewGauge(),
		disabledDone:   map[Partition]bool{},
		deleting:       map[[16]byte]string{},
	}
	reg.MustRegister(r.deleteRequests, r.deleteErrors, r.logSize)
	return r
}

// expireRemote runs remote retention for one partition, if this broker
// leads it: for a tiered topic (remote.storage.enable=true, copying or
// not) retention.ms, retention.bytes and the log start offset; for one
// turned off with remote.log.delete.on.disable=true, the deletion of its
// whole remote log.
func (rm *Manager) expireRemote(p Partition) {
	r := rm.retention
	rm.mu.Lock()
	tt, ok := rm.settings[p]
	rm.mu.Unlock()
	if !ok || !rm.b.IsLeader(p) {
		return
	}
	tp := tierPartition(p)
	if !tt.remote {
		if tt.deleteOnDisable {
			rm.deleteRemoteOnDisable(p)
		}
		return
	}
	r.mu.Lock()
	delete(r.disabledDone, p) // enabled again: a later disable deletes anew
	r.mu.Unlock()
	end, have, err := rm.idx.LogEnd(tp)
	if err != nil {
		rm.log.Warn("remote index: log end", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return
	}
	var localOnly int64
	for _, seg := range p.Log().Segments() {
		if !have || seg.NextOffset-1 > end {
			localOnly += seg.Size
		}
	}
	start, ok, err := rm.idx.LogStartOffset(tp)
	if err != nil {
		rm.log.Warn("remote index: log start offset", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return
	}
	if !ok {
		start = -1
	}
	pol := tier.RetentionPolicy{RetentionMs: tt.retentionMs, RetentionBytes: tt.retentionBytes, LocalOnlyBytes: localOnly, LogStartOffset: start}
	if !p.Log().Config().Delete { // cleanup.policy empty: no retention by time or size
		pol.RetentionMs, pol.RetentionBytes = -1, -1
	}
	st, err := rm.uploader.ExpirePartition(rm.ctx, tp, pol)
	r.deleteRequests.Add(float64(st.Attempts))
	r.deleteErrors.Add(float64(st.Failed))
	if err != nil && rm.ctx.Err() == nil {
		rm.warnings.Warn(rm.log, "remote retention; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "err", err)
	}
	if st.Deleted > 0 || st.Resumed > 0 {
		rm.log.Info("remote retention deleted segments", "topic", p.Topic(), "partition", p.Index(),
			"segments", st.Deleted, "bytes", st.Bytes, "resumed", st.Resumed, "log_start", st.NewLogStart)
	}
	// As in Kafka, the log start offset follows the remote log start up:
	// local copies of what was deleted remotely go too.
	if st.NewLogStart > p.Log().LogStartOffset() {
		if _, err := p.Log().DeleteRecordsBefore(min(st.NewLogStart, p.Log().LogEndOffset())); err != nil {
			rm.log.Warn("move the local log start up to the remote log start", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
	}
	if size, _, err := tier.RemoteLogSize(rm.idx, tp); err == nil {
		r.mu.Lock()
		r.passSize += size
		r.mu.Unlock()
	}
}

// deleteRemoteOnDisable deletes the remote log of a partition whose topic
// turned remote.storage.enable off with remote.log.delete.on.disable=true,
// once per partition and process (the bucket is listed once more after a
// restart).
func (rm *Manager) deleteRemoteOnDisable(p Partition) {
	r := rm.retention
	r.mu.Lock()
	done := r.disabledDone[p]
	r.mu.Unlock()
	if done {
		return
	}
	st, err := rm.uploader.DeletePartition(rm.ctx, tierPartition(p))
	r.deleteRequests.Add(float64(st.Attempts))
	r.deleteErrors.Add(float64(st.Failed))
	if err != nil {
		if rm.ctx.Err() == nil {
			rm.log.Warn("delete the remote log of a topic with remote storage turned off; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
		return
	}
	if st.Deleted > 0 {
		rm.log.Info("deleted the remote log: remote.storage.enable=false, remote.log.delete.on.disable=true",
			"topic", p.Topic(), "partition", p.Index(), "segments", st.Deleted, "bytes", st.Bytes)
	}
	r.mu.Lock()
	r.disabledDone[p] = true
	r.mu.Unlock()
}

// setRemoteLogSize publishes the remote log size summed by the pass.
func (rm *Manager) setRemoteLogSize() {
	r := rm.retention
	r.mu.Lock()
	r.logSize.Set(float64(r.passSize))
	r.passSize = 0
	r.mu.Unlock()
}

// ForgetRemoteTopic is called by reconcile for a partition it closes and
// deletes locally. A replica merely moved off this broker (its partition
// still in the metadata) leaves the bucket alone. When the topic itself is
// gone (the metadata has no topic of that id: deleted, perhaps recreated
// under the same name), its remote data is marked for deletion, persisted
// in the index, and the tier pass deletes the topic's objects
// (deleteRemoteTopics). When only the partition is gone, the topic is
// being deleted partition by partition: the pass marks it once its id is
// gone too.
func (rm *Manager) ForgetRemoteTopic(p Partition, md *controller.Metadata) {
	if rm == nil {
		return
	}
	r := rm.retention
	r.mu.Lock()
	delete(r.disabledDone, p)
	r.mu.Unlock()
	name, exists := md.TopicIDs[p.TopicID()]
	if t := md.Topics[name]; exists && t != nil && int(p.Index()) < len(t.Partitions) {
		return // moved to other brokers
	}
	rm.mu.Lock()
	tt := rm.settings[p]
	rm.mu.Unlock()
	if !tt.remote {
		// Never tiered, or its remote data already deleted on disable.
		return
	}
	if exists {
		r.mu.Lock()
		r.deleting[p.TopicID()] = p.Topic()
		r.mu.Unlock()
		return
	}
	rm.markTopicDeleted(p.TopicID(), p.Topic())
}

func (rm *Manager) markTopicDeleted(id [16]byte, name string) {
	if err := rm.idx.MarkTopicDeleted(id, name); err != nil {
		rm.log.Warn("remote index: mark a deleted topic; its objects stay for the reconciliation pass", "topic", name, "err", err)
	}
}

// deleteRemoteTopics deletes the objects and index entries of the topics
// marked deleted. A mark comes from a topic this broker had and saw
// leave the metadata (ForgetRemoteTopic). A topic id the metadata has
// (again: a wiped ZooKeeper, then a restore) is not deleted: its mark is
// cleared. Otherwise the deletion is first recorded in the bucket
// (tier/deletions.go), only while the bucket's cluster snapshot names
// this broker's cluster, and the objects go once the snapshot no longer
// names the topic and the record is of the bucket's owner
// (tier.DeletableTopic); until then, or after a failure, the mark stays
// for the next pass.
func (rm *Manager) deleteRemoteTopics() {
	r := rm.retention
	md := rm.b.Metadata()
	r.mu.Lock()
	for id, name := range r.deleting {
		if _, ok := md.TopicIDs[id]; !ok {
			rm.markTopicDeleted(id, name)
			delete(r.deleting, id)
		}
	}
	r.mu.Unlock()
	pend, err := rm.idx.PendingTopicDeletions()
	if err != nil {
		rm.log.Warn("remote index: pending topic deletions", "err", err)
		return
	}
	live := func(id [16]byte) bool {
		_, ok := rm.b.Metadata().TopicIDs[id]
		return ok
	}
	pend = slices.DeleteFunc(pend, func(d index.PendingTopicDeletion) bool {
		if !live(d.TopicID) {
			return false
		}
		if err := rm.idx.UnmarkTopicDeleted(d.TopicID); err != nil {
			rm.log.Warn("remote index: clear the deletion mark of a topic the metadata has", "topic", d.Topic, "err", err)
		} else {
			rm.log.Info("a topic marked deleted is in the metadata: its remote data stays", "topic", d.Topic, "topic_id", d.TopicID.String())
		}
		return true
	})
	if len(pend) == 0 || md.ClusterID == "" {
		return
	}
	snap, err := tier.ReadSnapshotTopics(rm.ctx, rm.store)
	if err != nil {
		rm.log.Warn("delete the remote data of deleted topics: read the cluster snapshot; retrying next pass", "err", err)
		return
	}
	if snap.Owner != md.ClusterID {
		rm.log.Debug("the remote data of deleted topics waits: the bucket's metadata is not this cluster's",
			"snapshot_cluster_id", snap.Owner, "cluster_id", md.ClusterID, "topics", len(pend))
		return
	}
	for _, d := range pend {
		if rm.ctx.Err() != nil {
			return
		}
		rec := tier.TopicDeletion{TopicID: d.TopicID.String(), ClusterID: md.ClusterID, DeletedMs: time.Now().UnixMilli()}
		if err := tier.RecordTopicDeletion(rm.ctx, rm.store, rec); err != nil {
			rm.log.Warn("delete the remote data of a deleted topic: record its deletion; retrying next pass", "topic", d.Topic, "err", err)
			continue
		}
		if ok, err := tier.DeletableTopic(rm.ctx, rm.store, snap, d.TopicID); err != nil || !ok {
			if err != nil {
				rm.log.Warn("delete the remote data of a deleted topic: read its deletion record; retrying next pass", "topic", d.Topic, "err", err)
			} else {
				rm.log.Debug("the remote data of a deleted topic waits for the cluster snapshot to drop it", "topic", d.Topic, "topic_id", d.TopicID.String())
			}
			continue
		}
		if live(d.TopicID) {
			continue // learned meanwhile: the next pass clears its mark
		}
		n, err := tier.DeleteTopic(rm.ctx, rm.store, rm.idx, d.TopicID)
		if err != nil {
			rm.log.Warn("delete the remote data of a deleted topic; retrying next pass", "topic", d.Topic, "topic_id", d.TopicID.String(), "err", err)
			continue
		}
		rm.log.Info("deleted the remote data of a deleted topic", "topic", d.Topic, "topic_id", d.TopicID.String(), "objects", n)
	}
}

// DeleteRecords is DeleteRecords on the leader. For a tiered partition
// the log start offset may lie below the local log start (Kafka's
// logStartOffset below its localLogStartOffset): it is recorded in the
// remote index, consumers below it get OFFSET_OUT_OF_RANGE, the remote
// segments wholly below it go at the next retention pass, and local
// segments below it at once. It returns the new low watermark.
func (rm *Manager) DeleteRecords(p Partition, off int64) (int64, error) {
	if !rm.RemoteReadable(p) {
		return p.Log().DeleteRecordsBefore(off)
	}
	if _, err := rm.idx.RaiseLogStartOffset(tierPartition(p), off); err != nil {
		rm.log.Warn("remote index: record the log start offset", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return -1, kerr.KafkaStorageError
	}
	if off > p.Log().LogStartOffset() {
		if _, err := p.Log().DeleteRecordsBefore(off); err != nil {
			return -1, err
		}
	}
	return rm.LogStart(p), nil
}

// Read-only DescribeConfigs entries of a tiered topic; they are not
// configs (AlterConfigs refuses them as unknown).
const (
	localSizeConfig  = "strata.local.log.size.bytes"
	remoteSizeConfig = "strata.remote.log.size.bytes"
)

// SizeConfigs are the size entries of a tiered topic's DescribeConfigs
// on this broker: the bytes of its partitions' local logs here, and of the
// remote logs of the partitions this broker leads (the sizes
// DescribeLogDirs gives per partition, summed). Requested names select
// them like configs.
func (rm *Manager) SizeConfigs(t *controller.Topic, o config.DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	if rm == nil {
		return nil
	}
	var local, remote int64
	tiered := false
	for _, pm := range t.Partitions {
		p := rm.b.Partition(t.Name, pm.Index)
		if p == nil || p.TopicID() != t.ID || !rm.RemoteReadable(p) {
			continue
		}
		tiered = true
		local += p.Log().Size()
		if rm.b.IsLeader(p) {
			if n, _, err := tier.RemoteLogSize(rm.idx, tierPartition(p)); err == nil {
				remote += n
			}
		}
	}
	if !tiered {
		return nil
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range []struct {
		name, doc string
		v         int64
	}{
		{localSizeConfig, "Read only, not a config: bytes of the topic's local log segments on this broker.", local},
		{remoteSizeConfig, "Read only, not a config: bytes of the remote log segments of the topic's partitions this broker leads.", remote},
	} {
		if o.Names != nil && !slices.Contains(o.Names, e.name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.ReadOnly = e.name, kmsg.StringPtr(strconv.FormatInt(e.v, 10)), true
		c.Source = kmsg.ConfigSourceUnknown
		c.ConfigType = kmsg.ConfigTypeLong
		if o.IncludeDocumentation {
			c.Documentation = kmsg.StringPtr(e.doc)
		}
		out = append(out, c)
	}
	return out
}
