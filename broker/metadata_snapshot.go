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
	var cluster snapshotWritten
	clusterVersion := int64(-1) // the metadata version cluster was written from
	groups := map[int32]*snapshotWritten{}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		version := s.ctrl.Metadata().Version
		if version != clusterVersion || cluster.refreshDue(now) {
			if snap, ok := s.clusterSnapshot(); ok {
				if s.writeSnapshot(&cluster, snap, now, func(ctx context.Context) error {
					snap.WrittenMs = now.UnixMilli()
					return tier.WriteClusterSnapshot(ctx, s.tier.store, snap)
				}, "write the cluster metadata snapshot to the bucket; retrying") {
					clusterVersion = version
				}
			}
		}
		for _, g := range s.groupSnapshots() {
			w := groups[g.Partition]
			if w == nil {
				w = &snapshotWritten{}
				groups[g.Partition] = w
			}
			s.writeSnapshot(w, g, now, func(ctx context.Context) error {
				g.WrittenMs = now.UnixMilli()
				return tier.WriteGroupOffsets(ctx, s.tier.store, g)
			}, "write group offsets snapshot to the bucket; retrying", "partition", g.Partition)
		}
	}
}

// snapshotWritten is what one snapshot object last held, and when.
type snapshotWritten struct {
	sum [32]byte
	at  time.Time
}

func (w *snapshotWritten) refreshDue(now time.Time) bool { return now.Sub(w.at) >= snapshotRefresh }

// writeSnapshot writes v with write when it differs from what w says was
// written, or the refresh is due, and reports whether v is now written.
func (s *Server) writeSnapshot(w *snapshotWritten, v any, now time.Time, write func(context.Context) error, warn string, args ...any) bool {
	sum := snapshotSum(v)
	if sum == w.sum && !w.refreshDue(now) {
		return true
	}
	ctx, cancel := context.WithTimeout(s.ctx, snapshotTimeout)
	err := write(ctx)
	cancel()
	if err != nil {
		s.log.Warn(warn, append(args, "err", err)...)
		return false
	}
	w.sum, w.at = sum, now
	return true
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
