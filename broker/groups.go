package broker

// Wiring of the group coordinator (package group) into the broker: the
// __consumer_offsets topic, which partitions this broker coordinates (the
// ones it leads), and the log adapter through which the coordinator
// appends and replays.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/group"
	"strata/controller"
	"strata/tier"
)

// offsetsTopic is Kafka's internal topic of committed offsets and group
// metadata.
const offsetsTopic = "__consumer_offsets"

// offsetsCommitTimeout bounds the wait for a coordinator write to become
// durable (Kafka's offsets.commit.timeout.ms default).
const offsetsCommitTimeout = 5 * time.Second

// groupsHost owns the coordinator and the partitions it was given.
type groupsHost struct {
	s     *Server
	coord *group.Coordinator

	mu  sync.Mutex
	led map[int32]*offsetsLog // offsets partitions handed to the coordinator

	// snapshotAsOf is the time (ms) as of which this broker's metadata
	// snapshots are all in the bucket; snapshotOwner the cluster id the
	// bucket's cluster snapshot named when last read (metadata_snapshot.go).
	snapshotAsOf  atomic.Int64
	snapshotOwner atomic.Pointer[string]
	// snapshotMu is held while group offsets snapshots are written, so
	// that the snapshot loop's write of older offsets never lands after
	// the final one of Close.
	snapshotMu sync.Mutex
}

func newGroupsHost(s *Server) *groupsHost {
	cfg := group.ConfigFromBroker(s.cfg)
	cfg.Logger = s.log.With("component", "group-coordinator")
	cfg.PartitionExists = func(topic string, part int32) bool {
		t := s.ctrl.Metadata().Topics[topic]
		return t != nil && part >= 0 && int(part) < len(t.Partitions)
	}
	h := &groupsHost{s: s, led: map[int32]*offsetsLog{}}
	h.snapshotAsOf.Store(-1)
	// KIP-848 consumer groups (68_consumer_group_heartbeat.go); their
	// timers reach the coordinator through h once it exists.
	cfg.Modern = group.ConsumerGroupHooks(s.consumerGroupConfig(), s.consumerTopics,
		func() *group.Coordinator { return h.coord })
	h.coord = group.New(cfg)
	return h
}

// syncGroups hands the coordinator the offsets partitions this broker
// leads and takes back the others. It runs after every reconcile, with
// the newest metadata (reconciles may finish out of order).
func (s *Server) syncGroups(*controller.Metadata) {
	h := s.groups
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	md := s.ctrl.Metadata()
	type wanted struct {
		p    *partition
		term leaderTerm
	}
	want := map[int32]wanted{}
	if t := md.Topics[offsetsTopic]; t != nil {
		h.coord.SetNumPartitions(int32(len(t.Partitions)))
		for _, pm := range t.Partitions {
			if pm.Leader != s.cfg.ID {
				continue
			}
			p := s.partition(offsetsTopic, pm.Index)
			if p == nil || p.TopicID() != t.ID {
				continue
			}
			// The metadata may be newer than the role the partition was
			// given (a reconcile of older metadata ends after the watch
			// delivered newer): until the reconcile of this leader epoch
			// has stopped its fetcher, the partition still follows the old
			// leader, whose acknowledgements may count records it appends
			// after the load's end. Loaded only once it leads locally.
			if term, ok := localLeaderTerm(p); ok && term.epoch == pm.LeaderEpoch {
				want[pm.Index] = wanted{p, term}
			}
		}
	}
	for idx, l := range h.led {
		// A new term (another leader epoch, or leadership lost and
		// regained between two syncs) is loaded anew: the log may hold
		// records of other leaders since the last load.
		if w, ok := want[idx]; !ok || w.p != l.p || w.term != l.term {
			h.coord.Resign(idx)
			delete(h.led, idx)
		}
	}
	for idx, w := range want {
		if h.led[idx] == nil {
			l := &offsetsLog{s: s, p: w.p, term: w.term}
			h.led[idx] = l
			h.coord.Elect(idx, l)
		}
	}
}

// leaderTerm identifies one spell of leadership of a partition by this
// broker: its leader epoch and the log end at which it began.
type leaderTerm struct {
	epoch int32
	start int64
}

// leads tells whether the partition still leads in the term it was
// loaded for.
func (l *offsetsLog) leads() bool {
	term, ok := localLeaderTerm(l.p)
	return ok && term == l.term
}

// localLeaderTerm is the term in which p leads as applied by reconcile
// (applyRole: its fetcher stopped), and false if p does not lead.
func localLeaderTerm(p *partition) (leaderTerm, bool) {
	epoch, start, leader := p.LeaderTerm()
	return leaderTerm{epoch, start}, leader
}

// finalSnapshotTimeout bounds the group offsets snapshot write of Close.
const finalSnapshotTimeout = 5 * time.Second

// finalGroupSnapshots writes, as the broker closes, the group offsets
// snapshots of the offsets partitions it still leads and has loaded (and
// the transaction state of the __transaction_state partitions), so
// that the commits since the snapshot loop's last check (at most
// snapshotCheck) are in the bucket too, when the bucket is this
// cluster's. It runs once the snapshot loop is told to stop and before
// the coordinator closes.
func (s *Server) finalGroupSnapshots() {
	if s.tier == nil || s.groups == nil || s.ctrl == nil {
		return
	}
	md := s.ctrl.Metadata()
	if md.ClusterID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), finalSnapshotTimeout)
	defer cancel()
	owner, err := tier.ReadClusterSnapshot(ctx, s.tier.store)
	if err != nil || owner.ClusterID != md.ClusterID {
		return // not this cluster's bucket (or unreadable): nothing is written
	}
	st := &snapshotState{groups: map[*offsetsLog]*snapshotWritten{}, merges: map[*offsetsLog]int{},
		txns: map[*offsetsLog]*snapshotWritten{}, closing: true,
		ownerOK: true, owner: md.ClusterID, ownerFor: md.ClusterID}
	if !s.writeGroupSnapshots(ctx, st, md, time.Now()) {
		s.log.Warn("not every group offsets snapshot was written to the bucket at shutdown")
	}
	if !s.writeTxnSnapshots(ctx, st, md, time.Now()) {
		s.log.Warn("not every transaction state snapshot was written to the bucket at shutdown")
	}
}

func (h *groupsHost) close() {
	if h != nil {
		h.coord.Close()
	}
}

// ensureOffsetsTopic creates __consumer_offsets if it does not exist
// (compacted, offsets.topic.num.partitions partitions, replication factor
// offsets.topic.replication.factor capped at the live brokers).
func (s *Server) ensureOffsetsTopic() (*controller.Topic, error) {
	md := s.ctrl.Metadata()
	if t := md.Topics[offsetsTopic]; t != nil {
		return t, nil
	}
	_, err := s.createTopic(context.Background(), controller.CreateTopicRequest{
		Name:              offsetsTopic,
		NumPartitions:     s.cfg.OffsetsTopicNumPartitions,
		ReplicationFactor: s.cfg.OffsetsReplicationFactor(len(md.Brokers)),
		Configs: map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "producer",
			"segment.bytes":    "104857600", // offsets.topic.segment.bytes
		},
	})
	if err != nil && !errors.Is(err, controller.ErrTopicExists) {
		return nil, fmt.Errorf("create %s: %w", offsetsTopic, err)
	}
	md = s.ctrl.Metadata()
	if err := s.reconcile(md); err != nil {
		s.log.Error("open offsets partitions", "err", err)
	}
	t := md.Topics[offsetsTopic]
	if t == nil {
		return nil, fmt.Errorf("%s not in metadata after creation", offsetsTopic)
	}
	s.log.Info("created internal topic", "topic", offsetsTopic, "partitions", len(t.Partitions))
	return t, nil
}

// offsetsLog is the coordinator's view of one offsets partition.
type offsetsLog struct {
	s *Server
	p *partition
	// term is the leadership the coordinator loaded the partition for.
	term leaderTerm
	// bucketLoaded is set once the load has taken in what the bucket's
	// group offsets snapshot of the partition holds (or found nothing of
	// this cluster's to take): until then the snapshot is not written
	// over (metadata_snapshot.go).
	bucketLoaded atomic.Bool
}

func (l *offsetsLog) Append(batch []byte) (int64, error) {
	if !l.s.isLeader(l.p) {
		return 0, kerr.NotLeaderForPartition
	}
	// As an acks=-1 produce: refused below min.insync.replicas (Kafka's
	// coordinator answers COORDINATOR_NOT_AVAILABLE then).
	if isr, minISR := l.p.ISRSize(), int(l.p.MinISR()); isr < minISR {
		return 0, fmt.Errorf("ISR has %d replicas, min.insync.replicas is %d: %w", isr, minISR, kerr.NotEnoughReplicas)
	}
	info, err := l.p.AppendAsLeader(batch)
	if err != nil {
		return 0, err
	}
	// With one replica the high watermark follows the log end; with more,
	// advanceHW holds it at what the ISR has (WaitDurable waits for it).
	l.p.AdvanceHW(l.p.Log().LogEndOffset())
	return info.LastOffset + 1, nil
}

// NextSequence is the base sequence of the coordinator's next
// transactional offset commit batch of a producer (group.SequenceLog).
func (l *offsetsLog) NextSequence(producerID int64, producerEpoch int16) int32 {
	return group.PartitionLogSequence(l.p.Log(), producerID, producerEpoch)
}

// WaitDurable waits for the high watermark to reach end, and fails as an
// acks=-1 produce does when the ISR fell below min.insync.replicas.
//
// The high watermark counts only while the partition leads in the term
// the coordinator loaded it for: once it follows, the new leader may
// truncate the append away and its own records raise the high watermark
// past end; a commit so "acknowledged" would be lost (Kafka's delayed
// produce fails with NOT_LEADER_OR_FOLLOWER when leadership moves).
func (l *offsetsLog) WaitDurable(end int64) error {
	if l.p.HW() < end {
		ch := make(chan struct{}, 1)
		l.p.AddWaiter(ch)
		defer l.p.RemoveWaiter(ch)
		t := time.NewTimer(offsetsCommitTimeout)
		defer t.Stop()
		for l.p.HW() < end {
			if !l.leads() {
				return kerr.NotLeaderForPartition
			}
			select {
			case <-ch:
			case <-t.C:
				return kerr.RequestTimedOut
			case <-l.s.ctx.Done():
				return kerr.NotLeaderForPartition
			}
		}
	}
	if !l.leads() { // checked after the high watermark was read
		return kerr.NotLeaderForPartition
	}
	if l.p.ISRSize() < int(l.p.MinISR()) {
		return kerr.NotEnoughReplicasAfterAppend
	}
	return nil
}

// Replay reads the partition from its start to the log end offset it has
// when the load starts, once the high watermark has reached that offset.
// A broker that has just become leader holds records of the previous
// leader beyond its own high watermark (a follower learns the high
// watermark one fetch late), among them commits that were acknowledged;
// reading only to the high watermark would lose them, and reading them
// before they are committed would serve what a later leader may not
// have. Kafka's loader, too, reads to the log end.
//
// An empty partition (nothing was ever written to it: the disks were
// wiped, ZooKeeper kept) first gets the committed offsets the bucket's
// snapshot kept of it, appended as commits (seedOffsets), so that the
// coordinator serves them from its first answer.
func (l *offsetsLog) Replay(fn func([]byte) error) error {
	end := l.p.Log().LogEndOffset()
	if err := l.waitHW(end); err != nil {
		return err
	}
	had := end > 0
	if err := l.s.seedOffsets(l, end); err != nil {
		return err
	}
	if e := l.p.Log().LogEndOffset(); e != end {
		end = e
		if err := l.waitHW(end); err != nil {
			return err
		}
	}
	var seed group.SeedScan
	off := l.p.Log().LogStartOffset()
	read := func(end int64) error {
		for off < end {
			fs, err := l.p.Log().Read(off, end, 1<<20, true)
			if err != nil {
				return fmt.Errorf("read %s-%d at %d: %w", offsetsTopic, l.p.Index(), off, err)
			}
			if fs.Len == 0 {
				return nil
			}
			buf := make([]byte, fs.Len)
			if _, err := fs.File.ReadAt(buf, fs.Pos); err != nil {
				return fmt.Errorf("read %s-%d at %d: %w", offsetsTopic, l.p.Index(), off, err)
			}
			seed.Scan(buf)
			if err := fn(buf); err != nil {
				return fmt.Errorf("replay %s-%d at %d: %w", offsetsTopic, l.p.Index(), off, err)
			}
			off = fs.LastOffset + 1
		}
		return nil
	}
	if err := read(end); err != nil {
		return err
	}
	if !had {
		return nil // seedOffsets decided
	}
	if !seed.Open() {
		// A partition with a history is what the snapshot was written
		// from.
		l.bucketLoaded.Store(true)
		return nil
	}
	// A load from the bucket began and was cut short (leadership moved,
	// the ISR shrank, a crash) before its last batch: nothing was served
	// since (a load serves only once it finished), so the bucket's
	// offsets are loaded again, whole, after what the partition holds.
	s := l.s
	s.log.Info("a load of committed offsets from the bucket into a __consumer_offsets partition was cut short; loading them again",
		"partition", l.p.Index())
	if err := s.seedOffsets(l, 0); err != nil {
		return err
	}
	if e := l.p.Log().LogEndOffset(); e != end {
		end = e
		if err := l.waitHW(end); err != nil {
			return err
		}
	}
	return read(end)
}

// waitHW waits until the high watermark reaches end, or fails with
// NOT_LEADER_OR_FOLLOWER once this broker no longer leads the partition.
func (l *offsetsLog) waitHW(end int64) error {
	if l.p.HW() >= end {
		return nil
	}
	ch := make(chan struct{}, 1)
	l.p.AddWaiter(ch)
	defer l.p.RemoveWaiter(ch)
	// Leadership changes wake the waiters too; the ticker only bounds
	// how long a missed wake-up could delay noticing one.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for l.p.HW() < end {
		if !l.s.isLeader(l.p) {
			return fmt.Errorf("load %s-%d: %w", l.p.Topic(), l.p.Index(), kerr.NotLeaderForPartition)
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-l.s.ctx.Done():
			return fmt.Errorf("load %s-%d: %w", l.p.Topic(), l.p.Index(), kerr.NotLeaderForPartition)
		}
	}
	return nil
}
