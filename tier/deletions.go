package tier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"strata/index"
)

// Recorded topic deletions, beside the metadata snapshots (snapshot.go):
//
//	_strata/deleted-topics/<topic id>   TopicDeletion
//
// A topic's objects go because of its deletion only once the deletion is
// recorded there and the cluster snapshot no longer names the topic
// (DeletableTopic): reconciliation of deleted topics
// (ReconcileDeletedTopics) and the brokers' deletion of a deleted topic's
// remote data both ask. The record is written before any of the objects
// go, by the cluster that deleted the topic (the active controller's
// broker, when a topic it had in its metadata is gone from it), or by
// strata admin restore --discard for the topics of the snapshot it
// throws away. A cluster that merely does not know a topic id (a fresh
// one pointed at another cluster's bucket) therefore deletes nothing of
// it. Only a record written by the cluster that owns the bucket counts
// (DeletableTopic), and a cluster records deletions only while it owns
// the bucket. Records are never removed: a late upload of a deleted topic
// is still an orphan.

const deletedTopicsPrefix = SnapshotPrefix + "deleted-topics/"

// TopicDeletion records that a topic was deleted. It names no topic, only
// its id (a recreated topic of the same name has another).
type TopicDeletion struct {
	TopicID   string `json:"topic_id"`
	ClusterID string `json:"cluster_id"` // the cluster whose topic it was
	DeletedMs int64  `json:"deleted_ms"`
	// DiscardedBy is the cluster that threw away the snapshot naming the
	// topic (strata admin restore --discard); "" for a deletion.
	DiscardedBy string `json:"discarded_by,omitempty"`
}

func deletionKey(id index.UUID) string { return deletedTopicsPrefix + id.String() }

func parseTopicID(s string) (index.UUID, error) {
	id, err := index.ParseUUID(s)
	if err == nil && id.IsZero() {
		err = errors.New("zero topic id")
	}
	if err != nil {
		return id, fmt.Errorf("bad topic id %q: %w", s, err)
	}
	return id, nil
}

// RecordTopicDeletion records d unless its topic's deletion is recorded
// already by the same writer (d.DiscardedBy for a discard, d.ClusterID
// otherwise). A record of another writer is replaced: it is one no owner
// of the bucket accepts (a failed discard's, or one written while the
// bucket was another cluster's), and the caller has checked that the
// bucket is its writer's.
func RecordTopicDeletion(ctx context.Context, store ObjectStore, d TopicDeletion) error {
	id, err := parseTopicID(d.TopicID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	key := deletionKey(id)
	cond := Cond{IfAbsent: true}
	for range 3 {
		_, err := store.PutIf(ctx, key, bytes.NewReader(b), int64(len(b)), cond)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrPreconditionFailed) {
			return fmt.Errorf("record the deletion of topic %s: %w", id, err)
		}
		var cur TopicDeletion
		etag, gerr := getJSON(ctx, store, key, &cur)
		switch {
		case errors.Is(gerr, ErrNotFound):
			cond = Cond{IfAbsent: true}
			continue
		case errors.Is(gerr, errBadSnapshot):
		case gerr != nil:
			return fmt.Errorf("record the deletion of topic %s: %w", id, gerr)
		case cur.writer() == d.writer():
			return nil
		}
		cond = Cond{IfMatch: etag}
	}
	return fmt.Errorf("record the deletion of topic %s: %w", id, ErrSnapshotChanged)
}

// writer is the cluster that wrote the record: the one that discarded
// the topic's snapshot, or else the one that deleted the topic.
func (d TopicDeletion) writer() string {
	if d.DiscardedBy != "" {
		return d.DiscardedBy
	}
	return d.ClusterID
}

// TopicDeletionRecorded reports whether the deletion of topic id is
// recorded in the bucket, by any cluster.
func TopicDeletionRecorded(ctx context.Context, store ObjectStore, id index.UUID) (bool, error) {
	_, err := store.Head(ctx, deletionKey(id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

// ReadTopicDeletion reads the record of topic id's deletion; ErrNotFound
// when there is none.
func ReadTopicDeletion(ctx context.Context, store ObjectStore, id index.UUID) (TopicDeletion, error) {
	var d TopicDeletion
	_, err := getJSON(ctx, store, deletionKey(id), &d)
	return d, err
}

// SnapshotTopics is what the bucket's cluster snapshot says about topics:
// the cluster that owns the bucket ("" when it has no snapshot) and the
// ids of the topics it names, with their names.
type SnapshotTopics struct {
	Owner string
	Named map[index.UUID]string
}

// ReadSnapshotTopics reads the owner and the topic ids of the bucket's
// cluster snapshot; none when the bucket has no snapshot.
func ReadSnapshotTopics(ctx context.Context, store ObjectStore) (SnapshotTopics, error) {
	cur, _, err := readClusterTagged(ctx, store)
	if err != nil {
		return SnapshotTopics{}, err
	}
	out := SnapshotTopics{Named: map[index.UUID]string{}}
	if cur == nil {
		return out, nil
	}
	out.Owner = cur.ClusterID
	for _, t := range cur.Topics {
		id, err := parseTopicID(t.TopicID)
		if err != nil {
			// Unreadable: nothing may be deleted on this snapshot's word.
			return SnapshotTopics{}, fmt.Errorf("%s: topic %s: %w", clusterSnapshotKey, t.Name, err)
		}
		out.Named[id] = t.Name
	}
	return out, nil
}

// DeletableTopic reports whether the objects of topic id may go because
// the topic was deleted: snap (from ReadSnapshotTopics) does not name it,
// and its deletion is recorded by the cluster that owns the bucket
// (snap.Owner): a deletion whose ClusterID it is, or a discard whose
// DiscardedBy it is. A record of any other cluster (one written while the
// bucket was not its writer's, or by a discard that did not take the
// bucket) deletes nothing, nor does any record in a bucket without a
// cluster snapshot.
func DeletableTopic(ctx context.Context, store ObjectStore, snap SnapshotTopics, id index.UUID) (bool, error) {
	if _, ok := snap.Named[id]; ok || snap.Owner == "" {
		return false, nil
	}
	d, err := ReadTopicDeletion(ctx, store, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return d.writer() == snap.Owner, nil
}
