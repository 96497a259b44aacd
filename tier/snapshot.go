package tier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The cluster's metadata kept in the bucket beside the segments, so that
// a cluster whose ZooKeeper and brokers' disks are all lost can be brought
// back from the bucket alone (strata admin restore; Redpanda calls it
// Whole Cluster Restore). The active controller's broker rewrites the
// cluster snapshot whenever the metadata changes and every minute; each
// group coordinator rewrites the committed offsets of the
// __consumer_offsets partitions it leads when they change and every
// minute. Objects under SnapshotPrefix are outside the segment layout:
// the index refresh, reconciliation and retention leave them alone.
//
//	_strata/cluster.json                   ClusterSnapshot
//	_strata/group-offsets/<partition>.json GroupOffsetsSnapshot
//	_strata/txn-state/<partition>.json     TxnStateSnapshot (txn_snapshot.go)
//	_strata/deleted-topics/<topic id>      TopicDeletion (deletions.go)
//
// The bucket's metadata belongs to one cluster: the one whose cluster id
// (ZooKeeper's /cluster/id) the cluster snapshot names. Every write of
// the cluster snapshot is a compare-and-swap on the version its writer
// read (PutIf), gives it the generation after the one it replaces, and is
// made only by the cluster it names (UpdateClusterSnapshot); group
// offsets are written only while the cluster snapshot names the writer's
// cluster. A cluster that finds another cluster's snapshot (a fresh
// ZooKeeper: a new cluster id) writes over none of it until strata admin
// restore adopts the snapshot's cluster id, or strata admin restore
// --discard hands the bucket over (DiscardClusterSnapshot).

// SnapshotPrefix starts the keys of the metadata snapshots.
const SnapshotPrefix = "_strata/"

const (
	clusterSnapshotKey    = SnapshotPrefix + "cluster.json"
	groupSnapshotPrefix   = SnapshotPrefix + "group-offsets/"
	maxSnapshotObject     = 256 << 20
	snapshotFormatVersion = 1
)

// ClusterSnapshot is the cluster's metadata: what ZooKeeper held.
type ClusterSnapshot struct {
	Version   int    `json:"version"`
	ClusterID string `json:"cluster_id"`
	// Generation counts the snapshot's writes: each one replaces
	// generation n by n+1 (a discard too), so it only moves forward.
	Generation int64 `json:"generation"`
	WrittenMs  int64 `json:"written_ms"`
	// NextProducerID is the first producer id not handed out: a restored
	// cluster hands out ids from there, so that new producers do not meet
	// the producer state restored with the segments.
	NextProducerID int64           `json:"next_producer_id"`
	Topics         []SnapshotTopic `json:"topics"`
	// BrokerConfigs are the dynamic broker configs, by broker id ("" for
	// the cluster-wide default).
	BrokerConfigs map[string]map[string]string `json:"broker_configs,omitempty"`
	// ACLs are the authorizer's ACLs (Kafka's /kafka-acl and
	// /kafka-acl-extended), by resource pattern, sorted. SCRAM
	// credentials are not kept: the bucket holds no secret.
	ACLs []SnapshotACLs `json:"acls,omitempty"`
	// Discarded names the snapshot of another cluster that strata admin
	// restore --discard replaced; later writes keep it, for the record.
	Discarded *DiscardedSnapshot `json:"discarded,omitempty"`
}

// DiscardedSnapshot is what a discard threw away.
type DiscardedSnapshot struct {
	ClusterID   string `json:"cluster_id"`
	Generation  int64  `json:"generation"`
	WrittenMs   int64  `json:"written_ms"`
	Topics      int    `json:"topics"`
	DiscardedMs int64  `json:"discarded_ms"`
}

// SnapshotTopic is one topic: its id (Kafka's base64url form, which the
// bucket's keys use), each partition's replicas, and its config overrides.
type SnapshotTopic struct {
	Name     string            `json:"name"`
	TopicID  string            `json:"topic_id"`
	Replicas [][]int32         `json:"replicas"`
	Configs  map[string]string `json:"configs,omitempty"`
}

// SnapshotACLs is one resource pattern's ACLs, with Kafka's names:
// resource type "Topic", "Group", "Cluster", …; pattern type "LITERAL" or
// "PREFIXED".
type SnapshotACLs struct {
	ResourceType string        `json:"resource_type"`
	PatternType  string        `json:"pattern_type"`
	Name         string        `json:"name"`
	Entries      []SnapshotACL `json:"entries"`
}

// SnapshotACL is one ACL of a resource pattern, as Kafka's JSON in
// /kafka-acl spells it.
type SnapshotACL struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

// GroupOffsetsSnapshot is the committed offsets of the groups of one
// __consumer_offsets partition: group, topic, partition.
type GroupOffsetsSnapshot struct {
	Version int `json:"version"`
	// ClusterID is the cluster that wrote it ("" before it was recorded).
	ClusterID string `json:"cluster_id,omitempty"`
	// Generation counts the object's writes, as the cluster snapshot's.
	Generation int64 `json:"generation,omitempty"`
	WrittenMs  int64 `json:"written_ms"`
	Partition  int32 `json:"partition"`
	// Partitions is the partition count of __consumer_offsets (0 when
	// not recorded): with another count, groups map to other partitions.
	Partitions int32                                          `json:"partitions,omitempty"`
	Groups     map[string]map[string]map[int32]SnapshotOffset `json:"groups"`
}

// SnapshotOffset is one committed offset.
type SnapshotOffset struct {
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// ForeignSnapshotError is the answer to a write of the bucket's metadata
// by a cluster that does not own it.
type ForeignSnapshotError struct {
	ClusterID string          // the writer's
	Snapshot  ClusterSnapshot // the bucket's, of another cluster
}

func (e *ForeignSnapshotError) Error() string {
	return fmt.Sprintf("the bucket holds the metadata snapshot of cluster %s (generation %d, written %s, %d topics), not of this cluster %s",
		e.Snapshot.ClusterID, e.Snapshot.Generation, time.UnixMilli(e.Snapshot.WrittenMs).UTC().Format(time.RFC3339),
		len(e.Snapshot.Topics), e.ClusterID)
}

// ErrSnapshotChanged: a snapshot object changed between its read and the
// write that was to replace it (another writer won); read it again.
var ErrSnapshotChanged = errors.New("the snapshot changed since it was read")

// ReadClusterSnapshot reads the cluster snapshot; ErrNotFound when the
// bucket has none.
func ReadClusterSnapshot(ctx context.Context, store ObjectStore) (ClusterSnapshot, error) {
	cur, _, err := readClusterTagged(ctx, store)
	if err != nil {
		return ClusterSnapshot{}, err
	}
	if cur == nil {
		return ClusterSnapshot{}, fmt.Errorf("%s: %w", clusterSnapshotKey, ErrNotFound)
	}
	return *cur, nil
}

// readClusterTagged reads the cluster snapshot and the ETag of the
// version read; nil and "" when the bucket has none.
func readClusterTagged(ctx context.Context, store ObjectStore) (*ClusterSnapshot, string, error) {
	var snap ClusterSnapshot
	etag, err := getJSON(ctx, store, clusterSnapshotKey, &snap)
	if errors.Is(err, ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if snap.Version != snapshotFormatVersion {
		return nil, "", fmt.Errorf("%s: format version %d, this build reads %d", clusterSnapshotKey, snap.Version, snapshotFormatVersion)
	}
	return &snap, etag, nil
}

// UpdateClusterSnapshot replaces the cluster snapshot, as cluster
// clusterID, by the one next makes from the current one (nil when the
// bucket has none). It refuses with a *ForeignSnapshotError, calling
// next not at all, when the current one is another cluster's. The new
// snapshot gets the generation after the current one's and is written
// only if the current one is still there unchanged (ErrSnapshotChanged
// otherwise). It returns what it wrote.
func UpdateClusterSnapshot(ctx context.Context, store ObjectStore, clusterID string, next func(cur *ClusterSnapshot) (ClusterSnapshot, error)) (ClusterSnapshot, error) {
	if clusterID == "" {
		return ClusterSnapshot{}, errors.New("write the cluster snapshot: no cluster id")
	}
	cur, etag, err := readClusterTagged(ctx, store)
	if err != nil {
		return ClusterSnapshot{}, err
	}
	if cur != nil && cur.ClusterID != clusterID {
		return ClusterSnapshot{}, &ForeignSnapshotError{ClusterID: clusterID, Snapshot: *cur}
	}
	snap, err := next(cur)
	if err != nil {
		return ClusterSnapshot{}, err
	}
	snap.Version, snap.ClusterID, snap.Generation = snapshotFormatVersion, clusterID, 1
	if cur != nil {
		snap.Generation = cur.Generation + 1
	}
	if err := casJSON(ctx, store, clusterSnapshotKey, snap, etag); err != nil {
		return ClusterSnapshot{}, err
	}
	return snap, nil
}

// ErrOwnSnapshot: a discard found the snapshot of the cluster that asked.
var ErrOwnSnapshot = errors.New("the bucket's metadata snapshot is this cluster's")

// RecentSnapshotError is the answer of a discard to a snapshot written
// less than its minimum age ago: its cluster may well be running (the
// active controller rewrites it at least every minute).
type RecentSnapshotError struct {
	Snapshot ClusterSnapshot
	Age      time.Duration // how long ago it was written
}

func (e *RecentSnapshotError) Error() string {
	return fmt.Sprintf("the metadata snapshot of cluster %s was written %s ago (generation %d, %d topics): that cluster may be running on this bucket",
		e.Snapshot.ClusterID, e.Age.Round(time.Second), e.Snapshot.Generation, len(e.Snapshot.Topics))
}

// DiscardClusterSnapshot hands the bucket's metadata to cluster clusterID
// (strata admin restore --discard) and returns the snapshot it threw
// away. It records the deletion of every topic that snapshot names (so
// that reconciliation deletes their objects, once nothing names them and
// the grace period has passed), then replaces the snapshot by an empty
// one of clusterID, at the next generation, naming what it discarded;
// then it deletes the group offsets and transaction state of other
// clusters. It fails with
// ErrNotFound when the bucket has no snapshot, ErrOwnSnapshot when it is
// clusterID's already, and a *RecentSnapshotError, writing nothing, when
// it was written less than minAge before now (0: no such check).
func DiscardClusterSnapshot(ctx context.Context, store ObjectStore, clusterID string, now time.Time, minAge time.Duration) (ClusterSnapshot, error) {
	if clusterID == "" {
		return ClusterSnapshot{}, errors.New("discard the cluster snapshot: no cluster id")
	}
	cur, etag, err := readClusterTagged(ctx, store)
	switch {
	case err != nil:
		return ClusterSnapshot{}, err
	case cur == nil:
		return ClusterSnapshot{}, fmt.Errorf("%s: %w", clusterSnapshotKey, ErrNotFound)
	case cur.ClusterID == clusterID:
		return *cur, ErrOwnSnapshot
	}
	if age := now.Sub(time.UnixMilli(cur.WrittenMs)); age < minAge {
		return *cur, &RecentSnapshotError{Snapshot: *cur, Age: age}
	}
	// The records first: while the snapshot names the topics they delete
	// nothing (DeletableTopic), and once it no longer does none is missing.
	for _, t := range cur.Topics {
		id, err := parseTopicID(t.TopicID)
		if err != nil {
			return *cur, fmt.Errorf("topic %s: %w", t.Name, err)
		}
		if err := RecordTopicDeletion(ctx, store, TopicDeletion{TopicID: id.String(), ClusterID: cur.ClusterID, DeletedMs: now.UnixMilli(), DiscardedBy: clusterID}); err != nil {
			return *cur, err
		}
	}
	snap := ClusterSnapshot{
		Version: snapshotFormatVersion, ClusterID: clusterID, Generation: cur.Generation + 1, WrittenMs: now.UnixMilli(),
		Topics: []SnapshotTopic{},
		Discarded: &DiscardedSnapshot{ClusterID: cur.ClusterID, Generation: cur.Generation, WrittenMs: cur.WrittenMs,
			Topics: len(cur.Topics), DiscardedMs: now.UnixMilli()},
	}
	if err := casJSON(ctx, store, clusterSnapshotKey, snap, etag); err != nil {
		return *cur, err
	}
	gs, err := readGroupObjects(ctx, store)
	if err != nil {
		return *cur, err
	}
	var stale []string
	for _, g := range gs {
		if g.snap.ClusterID != clusterID {
			stale = append(stale, g.key)
		}
	}
	if len(stale) > 0 {
		if err := store.DeleteMany(ctx, stale); err != nil {
			return *cur, fmt.Errorf("delete the discarded group offsets: %w", err)
		}
	}
	if err := deleteForeignTxnStates(ctx, store, clusterID); err != nil {
		return *cur, fmt.Errorf("delete the discarded transaction state: %w", err)
	}
	return *cur, nil
}

func groupKey(partition int32) string {
	return groupSnapshotPrefix + strconv.Itoa(int(partition)) + ".json"
}

// WriteGroupOffsets stores the offsets of one __consumer_offsets
// partition's groups as snap.ClusterID's, over the partition's object at
// the generation after its own, if that object did not change meanwhile
// (ErrSnapshotChanged otherwise). The caller has checked that the cluster
// snapshot names snap.ClusterID (an object of another cluster is then
// one the bucket's owner discarded or never read) and that its
// coordinator loaded what the object held.
func WriteGroupOffsets(ctx context.Context, store ObjectStore, snap GroupOffsetsSnapshot) error {
	if snap.ClusterID == "" {
		return errors.New("write group offsets: no cluster id")
	}
	key := groupKey(snap.Partition)
	var cur GroupOffsetsSnapshot
	etag, err := getJSON(ctx, store, key, &cur)
	switch {
	case errors.Is(err, ErrNotFound):
		etag = ""
	case errors.Is(err, errBadSnapshot):
		// Unreadable: replaced (etag is the version read).
	case err != nil:
		return err
	}
	snap.Version, snap.Generation = snapshotFormatVersion, cur.Generation+1
	return casJSON(ctx, store, key, snap, etag)
}

// ReadGroupOffsetsPartition reads one partition's group offsets;
// ErrNotFound when the bucket has none.
func ReadGroupOffsetsPartition(ctx context.Context, store ObjectStore, partition int32) (GroupOffsetsSnapshot, error) {
	var g GroupOffsetsSnapshot
	_, err := getJSON(ctx, store, groupKey(partition), &g)
	return g, err
}

// ReadGroupOffsets reads every partition's group offsets snapshot written
// by cluster clusterID (or by a build that did not record the cluster).
func ReadGroupOffsets(ctx context.Context, store ObjectStore, clusterID string) ([]GroupOffsetsSnapshot, error) {
	gs, err := readGroupObjects(ctx, store)
	if err != nil {
		return nil, err
	}
	out := make([]GroupOffsetsSnapshot, 0, len(gs))
	for _, g := range gs {
		if g.snap.ClusterID == "" || g.snap.ClusterID == clusterID {
			out = append(out, g.snap)
		}
	}
	return out, nil
}

// GroupOffsetsPartitionCount returns the __consumer_offsets partition
// count one of the bucket's group offsets objects was written with (0
// when it does not say), and false when the bucket has none.
func GroupOffsetsPartitionCount(ctx context.Context, store ObjectStore) (int32, bool, error) {
	for info, err := range store.List(ctx, groupSnapshotPrefix) {
		if err != nil {
			return 0, false, err
		}
		if !strings.HasSuffix(info.Key, ".json") {
			continue
		}
		var g GroupOffsetsSnapshot
		if _, err := getJSON(ctx, store, info.Key, &g); errors.Is(err, ErrNotFound) {
			continue // replaced meanwhile
		} else if err != nil {
			return 0, false, err
		}
		return g.Partitions, true, nil
	}
	return 0, false, nil
}

type groupObject struct {
	key  string
	snap GroupOffsetsSnapshot
}

func readGroupObjects(ctx context.Context, store ObjectStore) ([]groupObject, error) {
	var keys []string
	for info, err := range store.List(ctx, groupSnapshotPrefix) {
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(info.Key, ".json") {
			keys = append(keys, info.Key)
		}
	}
	slices.Sort(keys)
	out := make([]groupObject, 0, len(keys))
	for _, k := range keys {
		var g GroupOffsetsSnapshot
		if _, err := getJSON(ctx, store, k, &g); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // replaced meanwhile
			}
			return nil, err
		}
		out = append(out, groupObject{k, g})
	}
	return out, nil
}

// errBadSnapshot: a snapshot object that does not decode.
var errBadSnapshot = errors.New("unreadable snapshot object")

// casJSON writes v at key if the object there is still the version
// etag names ("": still absent), as a conditional put. A failed
// condition is read back: if the object is what this call wrote (a
// retried request whose first attempt landed) the write stands;
// otherwise the error wraps ErrSnapshotChanged.
func casJSON(ctx context.Context, store ObjectStore, key string, v any, etag string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	cond := Cond{IfAbsent: etag == "", IfMatch: etag}
	if _, err := store.PutIf(ctx, key, bytes.NewReader(b), int64(len(b)), cond); err != nil {
		if !errors.Is(err, ErrPreconditionFailed) {
			return fmt.Errorf("write %s: %w", key, err)
		}
		if got, _, rerr := store.GetTagged(ctx, key, maxSnapshotObject); rerr == nil && bytes.Equal(got, b) {
			return nil
		}
		return fmt.Errorf("write %s: %w", key, ErrSnapshotChanged)
	}
	return nil
}

// getJSON reads the object at key into v and returns the ETag of the
// version read. An object that does not decode is errBadSnapshot (with
// its ETag).
func getJSON(ctx context.Context, store ObjectStore, key string, v any) (string, error) {
	b, etag, err := store.GetTagged(ctx, key, maxSnapshotObject)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return etag, fmt.Errorf("%w: %s: %v", errBadSnapshot, key, err)
	}
	return etag, nil
}
