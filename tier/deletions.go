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
// it. Records are never removed: a late upload of a deleted topic is
// still an orphan.

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
// already.
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
	if _, err := store.PutIf(ctx, key, bytes.NewReader(b), int64(len(b)), Cond{IfAbsent: true}); err != nil && !errors.Is(err, ErrPreconditionFailed) {
		return fmt.Errorf("record the deletion of topic %s: %w", id, err)
	}
	return nil
}

// TopicDeletionRecorded reports whether the deletion of topic id is
// recorded in the bucket.
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

// SnapshotTopicIDs returns the topic ids the bucket's cluster snapshot
// names, with their names; none when the bucket has no snapshot.
func SnapshotTopicIDs(ctx context.Context, store ObjectStore) (map[index.UUID]string, error) {
	cur, _, err := readClusterTagged(ctx, store)
	if err != nil {
		return nil, err
	}
	out := map[index.UUID]string{}
	if cur == nil {
		return out, nil
	}
	for _, t := range cur.Topics {
		id, err := parseTopicID(t.TopicID)
		if err != nil {
			// Unreadable: nothing may be deleted on this snapshot's word.
			return nil, fmt.Errorf("%s: topic %s: %w", clusterSnapshotKey, t.Name, err)
		}
		out[id] = t.Name
	}
	return out, nil
}

// DeletableTopic reports whether the objects of topic id may go because
// the topic was deleted: its deletion is recorded, and named (the topic
// ids of the cluster snapshot, from SnapshotTopicIDs) does not hold it.
func DeletableTopic(ctx context.Context, store ObjectStore, named map[index.UUID]string, id index.UUID) (bool, error) {
	if _, ok := named[id]; ok {
		return false, nil
	}
	return TopicDeletionRecorded(ctx, store, id)
}
