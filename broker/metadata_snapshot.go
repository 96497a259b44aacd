package broker

// The metadata snapshots in the bucket (tier/snapshot.go): the broker that
// is the active controller writes the cluster snapshot, and every group
// coordinator the committed offsets of the __consumer_offsets partitions
// it leads, each when it changed and at least every snapshotRefresh.
//
// The bucket's metadata belongs to the cluster its cluster snapshot names.
// A broker whose cluster (ZooKeeper's /cluster/id) is not that one writes
// nothing over it and says so at WARN with the commands that restore it
// or discard it; once strata admin restore adopts the snapshot's cluster
// id, or restore --discard hands the bucket over, it writes again. The
// cluster snapshot is only ever replaced through
// tier.UpdateClusterSnapshot (a compare-and-swap that raises its
// generation), and a topic it names that the metadata does not have stays
// in it unless its deletion is recorded in the bucket: the active
// controller records the deletion of each topic it had in its metadata
// and no longer has, before anything of the topic is deleted
// (tier/deletions.go). So a controller whose view has not (yet) loaded
// a topic never drops it from the snapshot.
//
// A group offsets snapshot is only replaced by a coordinator that loaded
// it: an empty partition loads the snapshot's offsets before it serves
// (seedOffsets, from offsetsLog.Replay); a partition loaded while the
// bucket was another cluster's takes in the offsets it lacks once the
// bucket is this cluster's (mergeOffsets); a partition with a history
// is what the snapshot was written from.
//
// groupsHost.snapshotAsOf is the time as of which everything this broker
// writes is in the bucket (the cluster snapshot if it is the controller,
// the offsets of every partition it coordinates); strata admin cluster
// drain waits for every broker's to pass the end of the uploads, through
// the read-only DescribeConfigs entries of snapshotConfigs.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/broker/group"
	"strata/controller"
	"strata/index"
	"strata/tier"
)

const (
	snapshotCheck   = time.Second // how often changes are looked for
	snapshotRefresh = time.Minute // the longest a snapshot goes unwritten
	snapshotTimeout = 30 * time.Second
	// ownerRecheck is how long a read of the bucket's owner is trusted
	// while it is this cluster; otherwise it is read at every check.
	ownerRecheck = 10 * time.Second
	// mergeTries bounds the checks at which a merge retries offsets of
	// partitions the metadata does not have (yet).
	mergeTries = 30
)

// Read-only entries of this broker's DescribeConfigs, not configs, that
// strata admin cluster drain reads.
const (
	snapshotWrittenConfig = "strata.snapshot.written.ms"
	snapshotOwnerConfig   = "strata.snapshot.cluster.id"
)

// snapshotState is the snapshot loop's.
type snapshotState struct {
	cluster        snapshotWritten
	clusterVersion int64 // the metadata version cluster was written from
	groups         map[*offsetsLog]*snapshotWritten
	txns           map[*offsetsLog]*snapshotWritten // __transaction_state partitions (txn_snapshot.go)
	merges         map[*offsetsLog]int              // merge attempts
	// seen holds the topic ids of the metadata while this broker is the
	// active controller: one that leaves it was deleted.
	seen map[[16]byte]bool

	owner     string // the cluster id the bucket's cluster snapshot names; "" none
	ownerOK   bool   // owner was read
	ownerRead time.Time
	ownerFor  string // this cluster's id when owner was read
	warned    string // the foreign snapshot last warned about
	carried   map[string]bool
	closing   bool // the write of Close: nothing is merged
}

// snapshotLoop writes the snapshots while the broker runs.
func (s *Server) snapshotLoop() {
	defer s.wg.Done()
	t := time.NewTicker(snapshotCheck)
	defer t.Stop()
	st := &snapshotState{clusterVersion: -1, groups: map[*offsetsLog]*snapshotWritten{}, txns: map[*offsetsLog]*snapshotWritten{}, merges: map[*offsetsLog]int{},
		seen: map[[16]byte]bool{}, carried: map[string]bool{}}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.snapshotTick(st, time.Now())
	}
}

// snapshotTick is one check: the owner, the cluster snapshot, the group
// offsets, the transaction state, and the time they are all in the bucket
// as of.
func (s *Server) snapshotTick(st *snapshotState, now time.Time) {
	md := s.ctrl.Metadata()
	if md.ClusterID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, snapshotTimeout)
	defer cancel()
	s.readOwner(ctx, st, md, now)
	complete := true
	if s.activeController() {
		// The metadata read once this broker is known to be the active
		// controller: md may be the view of a broker that was not.
		cmd := s.ctrl.Metadata()
		if !s.recordDeletions(ctx, st, cmd, now) {
			complete = false
		}
		if cmd.ClusterID != md.ClusterID || !s.writeClusterSnapshot(ctx, st, cmd, now) {
			complete = false
		}
	} else {
		clear(st.seen) // a view other than the controller's proves no deletion
	}
	if !s.writeGroupSnapshots(ctx, st, md, now) {
		complete = false
	}
	if !s.writeTxnSnapshots(ctx, st, md, now) {
		complete = false
	}
	if complete && st.ownerOK && st.owner == md.ClusterID && s.ctx.Err() == nil {
		s.groups.snapshotAsOf.Store(now.UnixMilli())
	}
}

// activeController reports whether this broker is the active controller
// (or the embedded one), whose metadata is the cluster's.
func (s *Server) activeController() bool {
	ac, ok := s.ctrl.(activeController)
	return !ok || ac.IsActive()
}

// readOwner reads which cluster the bucket's cluster snapshot names when
// the last read is stale, and warns once about another cluster's.
func (s *Server) readOwner(ctx context.Context, st *snapshotState, md *controller.Metadata, now time.Time) {
	if st.ownerOK && st.ownerFor == md.ClusterID && st.owner == md.ClusterID && now.Sub(st.ownerRead) < ownerRecheck {
		return
	}
	snap, err := tier.ReadClusterSnapshot(ctx, s.tier.store)
	switch {
	case errors.Is(err, tier.ErrNotFound):
		s.setOwner(st, md, "", nil, now)
	case err != nil:
		st.ownerOK = false
		if s.ctx.Err() == nil {
			s.tier.warnings.warn(s.log, "read the cluster metadata snapshot in the bucket; retrying", "tier", s.tier.store.String(), "err", err)
		}
	default:
		s.setOwner(st, md, snap.ClusterID, &snap, now)
	}
}

// setOwner records what the bucket's cluster snapshot names.
func (s *Server) setOwner(st *snapshotState, md *controller.Metadata, owner string, snap *tier.ClusterSnapshot, now time.Time) {
	wasForeign := st.ownerOK && st.owner != "" && st.owner != st.ownerFor
	st.owner, st.ownerOK, st.ownerRead, st.ownerFor = owner, true, now, md.ClusterID
	s.groups.snapshotOwner.Store(&owner)
	if owner == "" || owner == md.ClusterID {
		if wasForeign && owner == md.ClusterID {
			s.log.Info("the metadata snapshot in the bucket is this cluster's: writing it again", "tier", s.tier.store.String(), "cluster_id", owner)
		}
		st.warned = ""
		return
	}
	if snap == nil {
		return
	}
	key := fmt.Sprintf("%s/%d", snap.ClusterID, snap.Generation)
	if st.warned == key {
		return
	}
	st.warned = key
	s.log.Warn("the bucket holds the metadata snapshot of another cluster; this cluster writes nothing over it (cluster snapshot, group offsets) and deletes none of its objects until it is restored or discarded",
		"tier", s.tier.store.String(), "snapshot_cluster_id", snap.ClusterID, "generation", snap.Generation,
		"written", time.UnixMilli(snap.WrittenMs).UTC().Format(time.RFC3339), "topics", len(snap.Topics),
		"cluster_id", md.ClusterID, "restore", s.restoreCommand(false), "discard", s.restoreCommand(true))
}

// restoreCommand is the strata admin restore command line for this
// broker's cluster and tier.
func (s *Server) restoreCommand(discard bool) string {
	cmd := "strata admin --bootstrap " + s.AdvertisedAddr() + " restore"
	if discard {
		return cmd + " --discard --tier " + s.tier.store.String() + " (with the brokers' --s3-* flags; throws away the snapshot's topics, their records and its group offsets)"
	}
	if s.cfg.ZooKeeperConnect == "" {
		return "a restore needs a cluster on ZooKeeper (strata serve --zookeeper)"
	}
	return cmd + " --zookeeper " + s.cfg.ZooKeeperConnect + " --tier " + s.tier.store.String() + " (with the brokers' --s3-* flags)"
}

// recordDeletions records in the bucket the deletion of every topic that
// was in the active controller's metadata and is gone from it; false if
// one failed (retried at the next check). It records only while the
// bucket's cluster snapshot names this cluster: a cluster whose metadata
// went empty (ZooKeeper wiped under running brokers: a new cluster id)
// records nothing in the bucket of the cluster a restore brings back.
func (s *Server) recordDeletions(ctx context.Context, st *snapshotState, md *controller.Metadata, now time.Time) bool {
	switch {
	case !st.ownerOK:
		return false // unknown owner: the ids stay seen for the next check
	case st.owner != "" && st.owner != md.ClusterID:
		clear(st.seen) // another cluster's bucket: no deletion of ours is its business
		return true
	case st.owner == "":
		// No snapshot yet: recorded once this cluster's is written.
		for id := range md.TopicIDs {
			st.seen[id] = true
		}
		return false
	}
	ok := true
	for id := range st.seen {
		if _, there := md.TopicIDs[id]; there {
			continue
		}
		d := tier.TopicDeletion{TopicID: index.UUID(id).String(), ClusterID: md.ClusterID, DeletedMs: now.UnixMilli()}
		if err := tier.RecordTopicDeletion(ctx, s.tier.store, d); err != nil {
			ok = false
			if s.ctx.Err() == nil {
				s.log.Warn("record a topic's deletion in the bucket; retrying", "topic_id", d.TopicID, "err", err)
			}
			continue
		}
		delete(st.seen, id)
		s.log.Info("recorded a topic's deletion in the bucket: its objects may go", "topic_id", d.TopicID)
	}
	for id := range md.TopicIDs {
		st.seen[id] = true
	}
	return ok
}

// snapshotWritten is what one snapshot object last held, and when.
type snapshotWritten struct {
	sum [32]byte
	at  time.Time
}

func (w *snapshotWritten) refreshDue(now time.Time) bool { return now.Sub(w.at) >= snapshotRefresh }

func snapshotSum(v any) [32]byte {
	b, _ := json.Marshal(v)
	return sha256.Sum256(b)
}

// writeClusterSnapshot writes the cluster snapshot when the metadata
// changed or the refresh is due, and reports whether it is in the bucket.
func (s *Server) writeClusterSnapshot(ctx context.Context, st *snapshotState, md *controller.Metadata, now time.Time) bool {
	if st.ownerOK && st.owner != "" && st.owner != md.ClusterID {
		return false // another cluster's: readOwner warned
	}
	view := s.clusterSnapshot(md)
	if store, ok := s.ctrl.(controller.ACLStore); ok {
		view.ACLs = snapshotACLs(store.ACLs())
	}
	sum := snapshotSum(view)
	if md.Version == st.clusterVersion && sum == st.cluster.sum && !st.cluster.refreshDue(now) {
		return true
	}
	if r, ok := s.ctrl.(aclReader); ok {
		// What the ACL watch published may lag (a restore writes the ACLs
		// and then the cluster id this write follows) or have failed to
		// load: what is written is read now.
		acls, err := r.ReadACLs()
		if err != nil {
			if s.ctx.Err() == nil {
				s.tier.warnings.warn(s.log, "read the ACLs for the cluster metadata snapshot; retrying", "err", err)
			}
			return false
		}
		view.ACLs = snapshotACLs(acls)
	}
	snap, err := tier.UpdateClusterSnapshot(ctx, s.tier.store, md.ClusterID, func(cur *tier.ClusterSnapshot) (tier.ClusterSnapshot, error) {
		out := view
		out.Topics = slices.Clone(view.Topics)
		out.WrittenMs = now.UnixMilli()
		if cur != nil {
			out.Discarded = cur.Discarded
			// A view right after an election may lag: producer ids and
			// partitions only grow.
			out.NextProducerID = max(out.NextProducerID, cur.NextProducerID)
			keepPartitions(out.Topics, cur)
			kept, err := s.carryOver(ctx, st, md, cur)
			if err != nil {
				return out, err
			}
			if len(kept) > 0 {
				out.Topics = append(slices.Clip(out.Topics), kept...)
				slices.SortFunc(out.Topics, func(a, b tier.SnapshotTopic) int { return strings.Compare(a.Name, b.Name) })
			}
		}
		return out, nil
	})
	var foreign *tier.ForeignSnapshotError
	switch {
	case errors.As(err, &foreign):
		s.setOwner(st, md, foreign.Snapshot.ClusterID, &foreign.Snapshot, now)
		return false
	case err != nil:
		if s.ctx.Err() == nil {
			s.tier.warnings.warn(s.log, "write the cluster metadata snapshot to the bucket; retrying", "err", err)
		}
		return false
	}
	s.setOwner(st, md, md.ClusterID, nil, now)
	st.cluster, st.clusterVersion = snapshotWritten{sum: sum, at: now}, md.Version
	s.log.Debug("wrote the cluster metadata snapshot", "generation", snap.Generation, "topics", len(snap.Topics))
	return true
}

// carryOver returns the topics of cur the metadata does not have whole
// and whose deletion is not recorded: they stay in the snapshot as cur
// has them (the metadata has not loaded them: a restore under way, or a
// topic this broker knows only in part, controller.Topic.Partial). A
// topic whose name the metadata has under another id was deleted and
// created again: its deletion is recorded and it goes.
func (s *Server) carryOver(ctx context.Context, st *snapshotState, md *controller.Metadata, cur *tier.ClusterSnapshot) ([]tier.SnapshotTopic, error) {
	var kept []tier.SnapshotTopic
	for _, t := range cur.Topics {
		id, err := index.ParseUUID(t.TopicID)
		if err != nil {
			kept = append(kept, t) // not ours to judge
			continue
		}
		if name, ok := md.TopicIDs[[16]byte(id)]; ok {
			if mt := md.Topics[name]; mt != nil && mt.Partial && !strings.HasPrefix(name, "__") {
				kept = append(kept, t) // clusterSnapshot left it out
			}
			continue
		}
		if other := md.Topics[t.Name]; other != nil {
			d := tier.TopicDeletion{TopicID: t.TopicID, ClusterID: md.ClusterID, DeletedMs: time.Now().UnixMilli()}
			if err := tier.RecordTopicDeletion(ctx, s.tier.store, d); err != nil {
				return nil, err
			}
			continue
		}
		recorded, err := tier.TopicDeletionRecorded(ctx, s.tier.store, id)
		if err != nil {
			return nil, err
		}
		if recorded {
			continue
		}
		kept = append(kept, t)
		if !st.carried[t.TopicID] {
			st.carried[t.TopicID] = true
			s.log.Warn("the metadata snapshot in the bucket names a topic this cluster's metadata does not have and whose deletion is not recorded; it stays in the snapshot and its objects stay in the bucket",
				"topic", t.Name, "topic_id", t.TopicID)
		}
	}
	return kept, nil
}

// keepPartitions gives each topic of topics that cur holds (same id) with
// more partitions cur's replicas of the partitions beyond its own: a
// topic's partitions never go (Kafka cannot shrink a topic), so fewer is
// a view that has not caught up (an UpdateMetadata from before
// CreatePartitions).
func keepPartitions(topics []tier.SnapshotTopic, cur *tier.ClusterSnapshot) {
	byID := make(map[string]*tier.SnapshotTopic, len(cur.Topics))
	for i := range cur.Topics {
		byID[cur.Topics[i].TopicID] = &cur.Topics[i]
	}
	for i := range topics {
		t := &topics[i]
		if c := byID[t.TopicID]; c != nil && c.Name == t.Name && len(c.Replicas) > len(t.Replicas) {
			t.Replicas = append(slices.Clip(t.Replicas), c.Replicas[len(t.Replicas):]...)
		}
	}
}

// clusterSnapshot builds the cluster snapshot of md (without the time),
// leaving out the topics md knows only in part (controller.Topic.Partial:
// carryOver keeps the snapshot's) and every sensitive config
// (config.SensitiveName: passwords, and names of unknown type): the
// bucket holds no secret, and a restore leaves them to be set again.
func (s *Server) clusterSnapshot(md *controller.Metadata) tier.ClusterSnapshot {
	snap := tier.ClusterSnapshot{ClusterID: md.ClusterID, NextProducerID: md.NextProducerID, BrokerConfigs: md.BrokerConfigs,
		Topics: []tier.SnapshotTopic{}}
	cloned := false
	for b, cfg := range md.BrokerConfigs {
		clean := config.WithoutSensitive(cfg)
		if len(clean) == len(cfg) {
			continue
		}
		if !cloned {
			snap.BrokerConfigs = maps.Clone(md.BrokerConfigs) // md's is shared: never written to
			cloned = true
		}
		if len(clean) == 0 {
			delete(snap.BrokerConfigs, b)
		} else {
			snap.BrokerConfigs[b] = clean
		}
	}
	for _, name := range slices.Sorted(maps.Keys(md.Topics)) {
		if strings.HasPrefix(name, "__") {
			continue // internal topics are created again by the brokers
		}
		t := md.Topics[name]
		if t.Partial {
			continue
		}
		st := tier.SnapshotTopic{Name: name, TopicID: topicIDString(t.ID), Configs: config.WithoutSensitive(t.Configs)}
		for _, p := range t.Partitions {
			st.Replicas = append(st.Replicas, p.OriginalReplicas())
		}
		snap.Topics = append(snap.Topics, st)
	}
	return snap
}

// aclReader is a controller that reads the ACLs from their store on
// demand (the ZooKeeper controller).
type aclReader interface {
	ReadACLs() (map[controller.ACLResource][]controller.ACLEntry, error)
}

// snapshotACLs is acls as the cluster snapshot keeps them, sorted by
// resource pattern.
func snapshotACLs(acls map[controller.ACLResource][]controller.ACLEntry) []tier.SnapshotACLs {
	var out []tier.SnapshotACLs
	for r, entries := range acls {
		if len(entries) == 0 {
			continue
		}
		sa := tier.SnapshotACLs{ResourceType: r.Type, PatternType: r.Pattern, Name: r.Name}
		for _, e := range entries {
			sa.Entries = append(sa.Entries, tier.SnapshotACL(e))
		}
		out = append(out, sa)
	}
	slices.SortFunc(out, func(a, b tier.SnapshotACLs) int {
		return cmp.Or(strings.Compare(a.ResourceType, b.ResourceType), strings.Compare(a.PatternType, b.PatternType), strings.Compare(a.Name, b.Name))
	})
	return out
}

// ledOffsets returns the offsets partitions the coordinator was handed.
func (h *groupsHost) ledOffsets() []*offsetsLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*offsetsLog, 0, len(h.led))
	for _, idx := range slices.Sorted(maps.Keys(h.led)) {
		out = append(out, h.led[idx])
	}
	return out
}

// writeGroupSnapshots writes the committed offsets of each loaded
// __consumer_offsets partition this broker coordinates when they changed
// or the refresh is due, and reports whether all of them are in the
// bucket.
func (s *Server) writeGroupSnapshots(ctx context.Context, st *snapshotState, md *controller.Metadata, now time.Time) bool {
	h := s.groups
	h.snapshotMu.Lock()
	defer h.snapshotMu.Unlock()
	led := h.ledOffsets()
	for l := range st.groups {
		if !slices.Contains(led, l) {
			delete(st.groups, l)
			delete(st.merges, l)
		}
	}
	ours := st.ownerOK && st.owner == md.ClusterID
	nparts := int32(0)
	if t := md.Topics[offsetsTopic]; t != nil {
		nparts = int32(len(t.Partitions))
	}
	complete := true
	for _, l := range led {
		idx := l.p.Index()
		if !l.bucketLoaded.Load() {
			if !ours || !s.mergeOffsets(ctx, st, l, md) {
				complete = false
				continue
			}
		}
		offs, loaded := h.coord.PartitionOffsets(idx)
		if !loaded {
			complete = false
			continue
		}
		snap := tier.GroupOffsetsSnapshot{ClusterID: md.ClusterID, Partition: idx, Partitions: nparts, Groups: snapshotGroups(offs)}
		sum := snapshotSum(snap)
		w := st.groups[l]
		if w == nil {
			w = &snapshotWritten{}
			st.groups[l] = w
		}
		if sum == w.sum && !w.refreshDue(now) {
			continue
		}
		if !ours {
			complete = false
			continue
		}
		snap.WrittenMs = now.UnixMilli()
		if err := tier.WriteGroupOffsets(ctx, s.tier.store, snap); err != nil {
			complete = false
			if s.ctx.Err() == nil {
				s.tier.warnings.warn(s.log, "write group offsets snapshot to the bucket; retrying", "partition", idx, "err", err)
			}
			continue
		}
		w.sum, w.at = sum, now
	}
	return complete
}

// snapshotGroups is the snapshot form of a partition's offsets.
func snapshotGroups(offs map[string]map[group.TopicPartition]group.OffsetEntry) map[string]map[string]map[int32]tier.SnapshotOffset {
	out := map[string]map[string]map[int32]tier.SnapshotOffset{}
	for g, tps := range offs {
		topics := map[string]map[int32]tier.SnapshotOffset{}
		for tp, e := range tps {
			if e.Offset < 0 {
				continue
			}
			if topics[tp.Topic] == nil {
				topics[tp.Topic] = map[int32]tier.SnapshotOffset{}
			}
			topics[tp.Topic][tp.Partition] = tier.SnapshotOffset{Offset: e.Offset, LeaderEpoch: e.LeaderEpoch, Metadata: e.Metadata}
		}
		if len(topics) > 0 {
			out[g] = topics
		}
	}
	return out
}

// bucketOffsets returns the committed offsets the bucket's group offsets
// snapshots of cluster clusterID hold for the groups of offsets partition
// idx (of nparts): from the partition's own object when it was written
// with nparts partitions, else from all of them.
func (s *Server) bucketOffsets(ctx context.Context, idx, nparts int32, clusterID string) (map[string]map[group.TopicPartition]group.OffsetEntry, error) {
	var snaps []tier.GroupOffsetsSnapshot
	g, err := tier.ReadGroupOffsetsPartition(ctx, s.tier.store, idx)
	if errors.Is(err, tier.ErrNotFound) {
		// None of its own: only with another partition count may the
		// partition's groups be in the others.
		n, found, cerr := tier.GroupOffsetsPartitionCount(ctx, s.tier.store)
		if cerr != nil {
			return nil, cerr
		}
		if !found || n == 0 || n == nparts {
			return nil, nil
		}
	}
	switch {
	case err == nil && (g.Partitions == 0 || g.Partitions == nparts):
		snaps = append(snaps, g)
	case err == nil || errors.Is(err, tier.ErrNotFound):
		// Written with another partition count: the partition's groups
		// may be in any object.
		if snaps, err = tier.ReadGroupOffsets(ctx, s.tier.store, clusterID); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	now := time.Now().UnixMilli()
	out := map[string]map[group.TopicPartition]group.OffsetEntry{}
	for _, snap := range snaps {
		if snap.ClusterID != "" && snap.ClusterID != clusterID {
			continue // discarded
		}
		for gid, topics := range snap.Groups {
			if group.PartitionFor(gid, nparts) != idx {
				continue
			}
			for t, parts := range topics {
				for p, o := range parts {
					if out[gid] == nil {
						out[gid] = map[group.TopicPartition]group.OffsetEntry{}
					}
					out[gid][group.TopicPartition{Topic: t, Partition: p}] = group.OffsetEntry{
						Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestamp: now, ExpireTimestamp: -1,
					}
				}
			}
		}
	}
	return out, nil
}

// seedOffsets runs before a load replays an offsets partition whose log
// ends at end. An empty partition (nothing was ever written to it) gets
// the offsets the bucket's snapshot holds of its groups, appended as
// commits, when the bucket is this cluster's; the load waits (its groups
// answer COORDINATOR_LOAD_IN_PROGRESS) while the bucket cannot be read
// or the append fails. It sets l.bucketLoaded unless the bucket is
// another cluster's. A partition with a history is left to Replay, which
// tells a load cut short (group.SeedScan) from a history of its own.
func (s *Server) seedOffsets(l *offsetsLog, end int64) error {
	if s.tier == nil {
		l.bucketLoaded.Store(true)
		return nil
	}
	if end > 0 {
		return nil
	}
	return s.seedUntilDone(l.p, offsetsTopic,
		"load the committed offsets of an empty __consumer_offsets partition from the bucket; its groups wait, retrying",
		func() error { return s.trySeed(l) })
}

// seedUntilDone runs try, the seeding of an empty internal partition p of
// topic from the bucket, until it succeeds, warning with msg now and then,
// or until p is no longer led here (NOT_LEADER_OR_FOLLOWER: the load is
// dropped).
func (s *Server) seedUntilDone(p *partition, topic, msg string, try func() error) error {
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.NotLeaderForPartition) {
			return err
		}
		if attempt == 1 || attempt%10 == 0 {
			s.log.Warn(msg, "partition", p.Index(), "attempt", attempt, "err", err)
		}
		select {
		case <-s.ctx.Done():
			return fmt.Errorf("load %s-%d: %w", topic, p.Index(), kerr.NotLeaderForPartition)
		case <-time.After(snapshotCheck):
		}
		if !s.isLeader(p) {
			return fmt.Errorf("load %s-%d: %w", topic, p.Index(), kerr.NotLeaderForPartition)
		}
	}
}

// seedCut, when set (by tests), is asked before each batch trySeed
// appends and stops the load with its error.
var seedCut func(batch int) error

func (s *Server) trySeed(l *offsetsLog) error {
	ctx, cancel := context.WithTimeout(s.ctx, snapshotTimeout)
	defer cancel()
	md := s.ctrl.Metadata()
	if md.ClusterID == "" {
		return errors.New("the cluster id is not known yet")
	}
	owner, err := tier.ReadClusterSnapshot(ctx, s.tier.store)
	switch {
	case errors.Is(err, tier.ErrNotFound):
		l.bucketLoaded.Store(true) // nothing kept
		return nil
	case err != nil:
		return err
	case owner.ClusterID != md.ClusterID:
		return nil // another cluster's: merged once it is this cluster's
	}
	nparts := int32(1)
	if t := md.Topics[offsetsTopic]; t != nil {
		nparts = int32(len(t.Partitions))
	}
	offs, err := s.bucketOffsets(ctx, l.p.Index(), nparts, md.ClusterID)
	if err != nil {
		return err
	}
	n := 0
	for i, b := range group.OffsetCommitBatches(offs, time.Now()) {
		if seedCut != nil {
			if err := seedCut(i); err != nil {
				return err
			}
		}
		if _, err := l.Append(b); err != nil {
			return fmt.Errorf("append: %w", err)
		}
	}
	for _, tps := range offs {
		n += len(tps)
	}
	l.bucketLoaded.Store(true)
	if n > 0 {
		s.log.Info("loaded committed offsets into an empty __consumer_offsets partition from the bucket's snapshot",
			"partition", l.p.Index(), "groups", len(offs), "offsets", n)
	}
	return nil
}

// mergeOffsets commits into a loaded offsets partition that was loaded
// while the bucket was another cluster's (before a restore adopted its
// cluster id) the offsets the bucket's snapshot holds and the partition
// lacks, and reports whether the partition now holds the snapshot's.
// They are written as a load writes them (group.RestoreOffsets), without
// member checks, so a group that has members meanwhile takes them in
// too; a write that fails is retried at the next check and the partition
// is not taken as loaded before. Offsets of partitions the metadata does
// not have yet are tried again at the next checks, then left.
func (s *Server) mergeOffsets(ctx context.Context, st *snapshotState, l *offsetsLog, md *controller.Metadata) bool {
	h := s.groups
	idx := l.p.Index()
	cur, loaded := h.coord.PartitionOffsets(idx)
	if !loaded {
		return false
	}
	nparts := int32(1)
	if t := md.Topics[offsetsTopic]; t != nil {
		nparts = int32(len(t.Partitions))
	}
	offs, err := s.bucketOffsets(ctx, idx, nparts, md.ClusterID)
	if err != nil {
		if s.ctx.Err() == nil {
			s.tier.warnings.warn(s.log, "read group offsets snapshot from the bucket; retrying", "partition", idx, "err", err)
		}
		return false
	}
	st.merges[l]++
	missing := map[string]map[group.TopicPartition]group.OffsetEntry{}
	for gid, tps := range offs {
		for tp, e := range tps {
			if _, ok := cur[gid][tp]; ok {
				continue
			}
			if missing[gid] == nil {
				missing[gid] = map[group.TopicPartition]group.OffsetEntry{}
			}
			missing[gid][tp] = e
		}
	}
	// Restored as a load takes them, without member checks: a group that
	// has members meanwhile takes them in too; what a group committed
	// itself is not replaced.
	merged, unknown, err := h.coord.RestoreOffsets(missing)
	retry := err != nil || unknown > 0 && st.merges[l] < mergeTries
	if err != nil && s.ctx.Err() == nil {
		s.tier.warnings.warn(s.log, "merge the bucket's committed offsets into a __consumer_offsets partition; retrying", "partition", idx, "err", err)
	}
	if unknown > 0 && !retry {
		s.log.Info("left committed offsets of the bucket's snapshot unmerged: their topic partitions do not exist",
			"partition", idx, "offsets", unknown)
	}
	if merged > 0 {
		s.log.Info("merged committed offsets from the bucket's snapshot into a __consumer_offsets partition loaded before the bucket was this cluster's",
			"partition", idx, "offsets", merged)
	}
	if retry {
		return false
	}
	l.bucketLoaded.Store(true)
	return true
}

// snapshotConfigs are this broker's read-only snapshot entries of its
// DescribeConfigs (not configs): the time as of which its snapshots are
// all in the bucket (-1: not yet, or the bucket is another cluster's),
// and the cluster id the bucket's cluster snapshot names ("" when none).
func (s *Server) snapshotConfigs(o config.DescribeOptions) []kmsgConfig {
	if s.tier == nil || s.groups == nil {
		return nil
	}
	owner := ""
	if p := s.groups.snapshotOwner.Load(); p != nil {
		owner = *p
	}
	var out []kmsgConfig
	for _, e := range []struct {
		name, doc, v string
		typ          kmsg.ConfigType
	}{
		{snapshotWrittenConfig, "Read only, not a config: the time (ms) as of which this broker's metadata snapshots (the cluster's if it is the controller, the group offsets it coordinates) are all in the bucket; -1 when not yet.",
			strconv.FormatInt(s.groups.snapshotAsOf.Load(), 10), kmsg.ConfigTypeLong},
		{snapshotOwnerConfig, "Read only, not a config: the cluster id the bucket's cluster metadata snapshot names.", owner, kmsg.ConfigTypeString},
	} {
		if o.Names != nil && !slices.Contains(o.Names, e.name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.ReadOnly = e.name, kmsg.StringPtr(e.v), true
		c.Source = kmsg.ConfigSourceUnknown
		c.ConfigType = e.typ
		if o.IncludeDocumentation {
			c.Documentation = kmsg.StringPtr(e.doc)
		}
		out = append(out, c)
	}
	return out
}
