package broker

// The metadata snapshots in the bucket (tier/snapshot.go): the broker that
// is the active controller writes the cluster snapshot, and every group
// coordinator the committed offsets of the __consumer_offsets partitions
// it leads, each when it changed and at least every snapshotRefresh.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/tier"
)

const (
	snapshotCheck   = time.Second // how often changes are looked for
	snapshotRefresh = time.Minute // the longest a snapshot goes unwritten
	snapshotTimeout = 30 * time.Second
)

// snapshotLoop writes the snapshots while the broker runs.
func (s *Server) snapshotLoop() {
	defer s.wg.Done()
	t := time.NewTicker(snapshotCheck)
	defer t.Stop()
	var lastCluster [32]byte
	var lastClusterAt time.Time
	lastGroups := map[int32][32]byte{}
	lastGroupsAt := map[int32]time.Time{}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if snap, ok := s.clusterSnapshot(); ok {
			sum := snapshotSum(snap)
			if sum != lastCluster || now.Sub(lastClusterAt) >= snapshotRefresh {
				snap.WrittenMs = now.UnixMilli()
				ctx, cancel := context.WithTimeout(s.ctx, snapshotTimeout)
				err := tier.WriteClusterSnapshot(ctx, s.tier.store, snap)
				cancel()
				if err != nil {
					s.log.Warn("write the cluster metadata snapshot to the bucket; retrying", "err", err)
				} else {
					lastCluster, lastClusterAt = sum, now
				}
			}
		}
		for _, g := range s.groupSnapshots() {
			sum := snapshotSum(g)
			if sum == lastGroups[g.Partition] && now.Sub(lastGroupsAt[g.Partition]) < snapshotRefresh {
				continue
			}
			g.WrittenMs = now.UnixMilli()
			ctx, cancel := context.WithTimeout(s.ctx, snapshotTimeout)
			err := tier.WriteGroupOffsets(ctx, s.tier.store, g)
			cancel()
			if err != nil {
				s.log.Warn("write group offsets snapshot to the bucket; retrying", "partition", g.Partition, "err", err)
				continue
			}
			lastGroups[g.Partition], lastGroupsAt[g.Partition] = sum, now
		}
	}
}

func snapshotSum(v any) [32]byte {
	b, _ := json.Marshal(v)
	return sha256.Sum256(b)
}

// clusterSnapshot builds the cluster snapshot when this broker is the
// active controller (or the embedded one).
func (s *Server) clusterSnapshot() (tier.ClusterSnapshot, bool) {
	if ac, ok := s.ctrl.(activeController); ok && !ac.IsActive() {
		return tier.ClusterSnapshot{}, false
	}
	md := s.ctrl.Metadata()
	snap := tier.ClusterSnapshot{ClusterID: md.ClusterID, NextProducerID: md.NextProducerID, BrokerConfigs: md.BrokerConfigs}
	for _, name := range slices.Sorted(maps.Keys(md.Topics)) {
		if strings.HasPrefix(name, "__") {
			continue // internal topics are created again by the brokers
		}
		t := md.Topics[name]
		st := tier.SnapshotTopic{Name: name, TopicID: topicIDString(t.ID), Configs: t.Configs}
		for _, p := range t.Partitions {
			st.Replicas = append(st.Replicas, p.OriginalReplicas())
		}
		snap.Topics = append(snap.Topics, st)
	}
	return snap, true
}

// groupSnapshots returns the committed offsets of the groups of each
// __consumer_offsets partition this broker's coordinator leads.
func (s *Server) groupSnapshots() []tier.GroupOffsetsSnapshot {
	h := s.groups
	if h == nil {
		return nil
	}
	h.mu.Lock()
	led := slices.Sorted(maps.Keys(h.led))
	h.mu.Unlock()
	if len(led) == 0 {
		return nil
	}
	byPart := map[int32]*tier.GroupOffsetsSnapshot{}
	for _, p := range led {
		byPart[p] = &tier.GroupOffsetsSnapshot{Partition: p, Groups: map[string]map[string]map[int32]tier.SnapshotOffset{}}
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 4
	freq := kmsg.NewPtrOffsetFetchRequest()
	freq.Version = 8
	for _, g := range h.coord.ListGroups(lreq).Groups {
		if _, ok := byPart[h.coord.PartitionFor(g.Group)]; !ok {
			continue
		}
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g.Group
		freq.Groups = append(freq.Groups, rg)
	}
	if len(freq.Groups) > 0 {
		for _, g := range h.coord.OffsetFetch(freq).Groups {
			if g.ErrorCode != 0 {
				continue
			}
			snap := byPart[h.coord.PartitionFor(g.Group)]
			if snap == nil {
				continue
			}
			topics := map[string]map[int32]tier.SnapshotOffset{}
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 || p.Offset < 0 {
						continue
					}
					if topics[t.Topic] == nil {
						topics[t.Topic] = map[int32]tier.SnapshotOffset{}
					}
					o := tier.SnapshotOffset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch}
					if p.Metadata != nil {
						o.Metadata = *p.Metadata
					}
					topics[t.Topic][p.Partition] = o
				}
			}
			if len(topics) > 0 {
				snap.Groups[g.Group] = topics
			}
		}
	}
	out := make([]tier.GroupOffsetsSnapshot, 0, len(byPart))
	for _, p := range led {
		out = append(out, *byPart[p])
	}
	return out
}
