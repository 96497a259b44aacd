package tier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
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
//	_strata/cluster.json                 ClusterSnapshot
//	_strata/group-offsets/<partition>.json GroupOffsetsSnapshot

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
	WrittenMs int64  `json:"written_ms"`
	// NextProducerID is the first producer id not handed out: a restored
	// cluster hands out ids from there, so that new producers do not meet
	// the producer state restored with the segments.
	NextProducerID int64           `json:"next_producer_id"`
	Topics         []SnapshotTopic `json:"topics"`
	// BrokerConfigs are the dynamic broker configs, by broker id ("" for
	// the cluster-wide default).
	BrokerConfigs map[string]map[string]string `json:"broker_configs,omitempty"`
}

// SnapshotTopic is one topic: its id (Kafka's base64url form, which the
// bucket's keys use), each partition's replicas, and its config overrides.
type SnapshotTopic struct {
	Name     string            `json:"name"`
	TopicID  string            `json:"topic_id"`
	Replicas [][]int32         `json:"replicas"`
	Configs  map[string]string `json:"configs,omitempty"`
}

// GroupOffsetsSnapshot is the committed offsets of the groups of one
// __consumer_offsets partition: group, topic, partition.
type GroupOffsetsSnapshot struct {
	Version   int                                            `json:"version"`
	WrittenMs int64                                          `json:"written_ms"`
	Partition int32                                          `json:"partition"`
	Groups    map[string]map[string]map[int32]SnapshotOffset `json:"groups"`
}

// SnapshotOffset is one committed offset.
type SnapshotOffset struct {
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// WriteClusterSnapshot stores snap, replacing the previous one.
func WriteClusterSnapshot(ctx context.Context, store ObjectStore, snap ClusterSnapshot) error {
	snap.Version = snapshotFormatVersion
	return putJSON(ctx, store, clusterSnapshotKey, snap)
}

// ReadClusterSnapshot reads the cluster snapshot; ErrNotFound when the
// bucket has none.
func ReadClusterSnapshot(ctx context.Context, store ObjectStore) (ClusterSnapshot, error) {
	var snap ClusterSnapshot
	if err := getJSON(ctx, store, clusterSnapshotKey, &snap); err != nil {
		return snap, err
	}
	if snap.Version != snapshotFormatVersion {
		return snap, fmt.Errorf("%s: format version %d, this build reads %d", clusterSnapshotKey, snap.Version, snapshotFormatVersion)
	}
	return snap, nil
}

// WriteGroupOffsets stores the offsets of one __consumer_offsets
// partition's groups.
func WriteGroupOffsets(ctx context.Context, store ObjectStore, snap GroupOffsetsSnapshot) error {
	snap.Version = snapshotFormatVersion
	return putJSON(ctx, store, groupSnapshotPrefix+strconv.Itoa(int(snap.Partition))+".json", snap)
}

// ReadGroupOffsets reads every partition's group offsets snapshot.
func ReadGroupOffsets(ctx context.Context, store ObjectStore) ([]GroupOffsetsSnapshot, error) {
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
	out := make([]GroupOffsetsSnapshot, 0, len(keys))
	for _, k := range keys {
		var g GroupOffsetsSnapshot
		if err := getJSON(ctx, store, k, &g); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // replaced meanwhile
			}
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func putJSON(ctx context.Context, store ObjectStore, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func getJSON(ctx context.Context, store ObjectStore, key string, v any) error {
	r, err := store.Get(ctx, key, 0, maxSnapshotObject+1)
	if err != nil {
		return err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxSnapshotObject+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if len(b) > maxSnapshotObject {
		return fmt.Errorf("%s: larger than %d bytes", key, maxSnapshotObject)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}
