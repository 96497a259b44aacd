package tier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The transaction state kept in the bucket beside the group offsets
// (snapshot.go): each transaction coordinator writes the state of the
// transactional ids of every __transaction_state partition it leads,
// when it changes and every minute, so that a cluster whose disks are
// all lost (scaled to zero: strata admin cluster drain) comes back with
// every transactional id's producer id and epoch.
//
//	_strata/txn-state/<partition>.json TxnStateSnapshot
//
// Written, like the group offsets, only while the cluster snapshot names
// the writer's cluster.

const txnSnapshotPrefix = SnapshotPrefix + "txn-state/"

// ErrStaleTxnState is a transaction state write refused because a later
// leader of the partition wrote the object.
var ErrStaleTxnState = errors.New("transaction state written by a later leader")

// TxnStateSnapshot is the transaction state of one __transaction_state
// partition.
type TxnStateSnapshot struct {
	Version    int    `json:"version"`
	ClusterID  string `json:"cluster_id"`
	Generation int64  `json:"generation"`
	WrittenMs  int64  `json:"written_ms"`
	Partition  int32  `json:"partition"`
	// LeaderEpoch is the writer's leader epoch of the partition: a
	// write with a lower one than the object's is refused
	// (ErrStaleTxnState), so a coordinator that lost the partition
	// (frozen past its ZooKeeper session, or slow to see the new
	// metadata) cannot put older state over its successor's.
	LeaderEpoch int32 `json:"leader_epoch"`
	// Partitions is the partition count of __transaction_state: with
	// another count, transactional ids map to other partitions.
	Partitions   int32         `json:"partitions"`
	Transactions []SnapshotTxn `json:"transactions"`
}

// SnapshotTxn is one transactional id: its state as Kafka's
// TransactionLogValue record (Value, which is what a load takes in), and
// the fields a person reads first.
type SnapshotTxn struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	Value           []byte `json:"value"`
}

func txnKey(partition int32) string {
	return txnSnapshotPrefix + strconv.Itoa(int(partition)) + ".json"
}

// WriteTxnState stores one __transaction_state partition's transaction
// state as snap.ClusterID's, at the generation after its object's own,
// if that object did not change meanwhile (ErrSnapshotChanged
// otherwise), and unless the object was written by the same cluster at a
// higher leader epoch (ErrStaleTxnState). The caller has checked that the
// cluster snapshot names snap.ClusterID and that its coordinator loaded
// what the object held.
func WriteTxnState(ctx context.Context, store ObjectStore, snap TxnStateSnapshot) error {
	if snap.ClusterID == "" {
		return errors.New("write transaction state: no cluster id")
	}
	key := txnKey(snap.Partition)
	var cur TxnStateSnapshot
	etag, err := getJSON(ctx, store, key, &cur)
	switch {
	case errors.Is(err, ErrNotFound):
		etag = ""
	case errors.Is(err, errBadSnapshot):
		// Unreadable: replaced (etag is the version read).
	case err != nil:
		return err
	}
	if err == nil && cur.ClusterID == snap.ClusterID && cur.Partitions == snap.Partitions && cur.LeaderEpoch > snap.LeaderEpoch {
		return fmt.Errorf("%w: the object of partition %d is at leader epoch %d, the writer at %d", ErrStaleTxnState, snap.Partition, cur.LeaderEpoch, snap.LeaderEpoch)
	}
	if snap.Transactions == nil {
		snap.Transactions = []SnapshotTxn{}
	}
	snap.Version, snap.Generation = snapshotFormatVersion, cur.Generation+1
	return casJSON(ctx, store, key, snap, etag)
}

// ReadTxnStatePartition reads one partition's transaction state;
// ErrNotFound when the bucket has none.
func ReadTxnStatePartition(ctx context.Context, store ObjectStore, partition int32) (TxnStateSnapshot, error) {
	var s TxnStateSnapshot
	_, err := getJSON(ctx, store, txnKey(partition), &s)
	return s, err
}

// ReadTxnStates reads the transaction state of every partition written
// by cluster clusterID.
func ReadTxnStates(ctx context.Context, store ObjectStore, clusterID string) ([]TxnStateSnapshot, error) {
	objs, err := readTxnObjects(ctx, store)
	if err != nil {
		return nil, err
	}
	out := make([]TxnStateSnapshot, 0, len(objs))
	for _, o := range objs {
		if o.snap.ClusterID == clusterID {
			out = append(out, o.snap)
		}
	}
	return out, nil
}

type txnObject struct {
	key  string
	snap TxnStateSnapshot
}

func readTxnObjects(ctx context.Context, store ObjectStore) ([]txnObject, error) {
	var keys []string
	for info, err := range store.List(ctx, txnSnapshotPrefix) {
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(info.Key, ".json") {
			keys = append(keys, info.Key)
		}
	}
	slices.Sort(keys)
	out := make([]txnObject, 0, len(keys))
	for _, k := range keys {
		var s TxnStateSnapshot
		if _, err := getJSON(ctx, store, k, &s); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // replaced meanwhile
			}
			return nil, err
		}
		out = append(out, txnObject{k, s})
	}
	return out, nil
}

// deleteForeignTxnStates deletes the transaction state objects of
// clusters other than clusterID (a discard).
func deleteForeignTxnStates(ctx context.Context, store ObjectStore, clusterID string) error {
	objs, err := readTxnObjects(ctx, store)
	if err != nil {
		return err
	}
	var stale []string
	for _, o := range objs {
		if o.snap.ClusterID != clusterID {
			stale = append(stale, o.key)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	return store.DeleteMany(ctx, stale)
}
