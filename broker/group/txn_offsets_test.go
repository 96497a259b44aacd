package group

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/internal/vfs"
)

// partLog is an offsets partition on a real partition log, as the broker
// gives the coordinator (broker/groups.go), without replication.
type partLog struct {
	t *testing.T
	l *plog.Log
	// gate, if set, holds a replay after it took the log end, which it
	// tells on atEnd.
	gate, atEnd chan struct{}
}

func (p *partLog) Append(b []byte) (int64, error) {
	info, err := p.l.Append(b, 0)
	if err != nil {
		return 0, err
	}
	return info.LastOffset + 1, nil
}

func (p *partLog) WaitDurable(int64) error { return nil }

func (p *partLog) Replay(fn func([]byte) error) error {
	end := p.l.LogEndOffset()
	if p.gate != nil {
		p.atEnd <- struct{}{}
		<-p.gate
	}
	for off := p.l.LogStartOffset(); off < end; {
		fs, err := p.l.Read(off, end, 1<<20, true)
		if err != nil {
			return err
		}
		if fs.Len == 0 {
			return nil
		}
		buf := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(buf, fs.Pos); err != nil {
			return err
		}
		if err := fn(buf); err != nil {
			return err
		}
		off = fs.LastOffset + 1
	}
	return nil
}

func (p *partLog) NextSequence(pid int64, epoch int16) int32 {
	return PartitionLogSequence(p.l, pid, epoch)
}

// marker writes a transaction marker as WriteTxnMarkers does.
func (p *partLog) marker(pid int64, epoch int16, commit bool) {
	p.t.Helper()
	typ := plog.ControlAbort
	if commit {
		typ = plog.ControlCommit
	}
	if _, err := p.l.AppendControl(pid, epoch, plog.EndTxnMarker{Type: typ}, 0, 0); err != nil {
		p.t.Fatalf("marker of producer %d: %v", pid, err)
	}
}

func openPartLog(t *testing.T, fs vfs.FS) *partLog {
	t.Helper()
	fs.MkdirAll("__consumer_offsets-0", 0o755)
	cfg := plog.DefaultConfig()
	cfg.Compact = true
	l, err := plog.Open(plog.Options{FS: fs, Dir: "__consumer_offsets-0", Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &partLog{t: t, l: l}
}

// electLoaded starts a coordinator on l and waits for the load.
func electLoaded(t *testing.T, l Log) *Coordinator {
	t.Helper()
	c := New(testConfig())
	t.Cleanup(c.Close)
	c.Elect(0, l)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := c.PartitionOffsets(0); ok {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("partition not loaded after 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

type txnCommitOpts struct {
	version  int16
	gen      int32
	member   string
	instance *string
}

func txnCommit(c *Coordinator, group string, pid int64, epoch int16, topic string, part int32, off int64, o txnCommitOpts) int16 {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	if o.version != 0 {
		r.Version = o.version
	}
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx", group, pid, epoch
	r.Generation, r.MemberID, r.InstanceID = -1, "", nil
	if o.gen != 0 || o.member != "" || o.instance != nil {
		r.Generation, r.MemberID, r.InstanceID = o.gen, o.member, o.instance
	}
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.Metadata = part, off, kmsg.StringPtr("m")
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return c.TxnOffsetCommit(r).Topics[0].Partitions[0].ErrorCode
}

// stableFetch is an OffsetFetch v7 with require_stable.
func stableFetch(c *Coordinator, group, topic string, part int32) (int64, int16) {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group, r.RequireStable = 7, group, true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	r.Topics = append(r.Topics, rt)
	resp := c.OffsetFetch(r)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// stableFetchV8 is the same through the groups form (v8+).
func stableFetchV8(c *Coordinator, group, topic string, part int32) (int64, int16) {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.RequireStable = 8, true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	rg.Topics = append(rg.Topics, rt)
	r.Groups = append(r.Groups, rg)
	g := c.OffsetFetch(r).Groups[0]
	if g.ErrorCode != 0 {
		return -1, g.ErrorCode
	}
	p := g.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func wantOffset(t *testing.T, c *Coordinator, group, topic string, part int32, want int64) {
	t.Helper()
	if off, code := fetched(c, group, topic, part); code != 0 || off != want {
		t.Fatalf("%s %s-%d: offset %d code %d, want %d", group, topic, part, off, code, want)
	}
	if off, code := stableFetch(c, group, topic, part); code != 0 || off != want {
		t.Fatalf("%s %s-%d with require_stable: offset %d code %d, want %d", group, topic, part, off, code, want)
	}
}

func wantUnstable(t *testing.T, c *Coordinator, group, topic string, part int32) {
	t.Helper()
	for v, fetch := range map[string]func(*Coordinator, string, string, int32) (int64, int16){"v7": stableFetch, "v8": stableFetchV8} {
		if off, code := fetch(c, group, topic, part); code != kerr.UnstableOffsetCommit.Code || off != -1 {
			t.Fatalf("%s %s %s-%d with require_stable: offset %d code %d, want UNSTABLE_OFFSET_COMMIT", v, group, topic, part, off, code)
		}
	}
}

// Transactional offsets are invisible until their transaction commits,
// and gone when it aborts; the batch opens a transaction in the
// partition log.
func TestTxnOffsetCommitPendingThenCommitOrAbort(t *testing.T) {
	pl := openPartLog(t, vfs.NewCrashableMem())
	defer pl.l.Close()
	c := electLoaded(t, pl)

	if code := commit(c, "g", "", -1, "t", 0, 5, ""); code != 0 {
		t.Fatalf("plain commit: %d", code)
	}
	if code := txnCommit(c, "g", 7, 0, "t", 0, 10, txnCommitOpts{}); code != 0 {
		t.Fatalf("txn commit: %d", code)
	}
	if code := txnCommit(c, "g", 8, 0, "t", 1, 20, txnCommitOpts{version: 1}); code != 0 {
		t.Fatalf("txn commit v1: %d", code)
	}
	if _, ok := pl.l.OpenTransaction(7); !ok {
		t.Fatal("the transactional batch opened no transaction in the partition log")
	}
	// Invisible to a plain fetch; unstable with require_stable.
	if off, code := fetched(c, "g", "t", 0); code != 0 || off != 5 {
		t.Fatalf("pending offset visible: %d code %d, want 5", off, code)
	}
	if off, code := fetched(c, "g", "t", 1); code != 0 || off != -1 {
		t.Fatalf("pending offset visible: %d code %d, want none", off, code)
	}
	wantUnstable(t, c, "g", "t", 0)
	wantUnstable(t, c, "g", "t", 1)
	if off, code := stableFetch(c, "g", "t", 2); code != 0 || off != -1 {
		t.Fatalf("partition without pending offsets: %d code %d", off, code)
	}
	// A second commit in the same transaction follows the first.
	if code := txnCommit(c, "g", 7, 0, "t", 0, 11, txnCommitOpts{}); code != 0 {
		t.Fatalf("second txn commit: %d", code)
	}

	pl.marker(7, 0, true)
	c.CompleteTxn(0, 7, true)
	wantOffset(t, c, "g", "t", 0, 11)
	pl.marker(8, 0, false)
	c.CompleteTxn(0, 8, false)
	wantOffset(t, c, "g", "t", 1, -1)
	if _, ok := pl.l.OpenTransaction(7); ok {
		t.Fatal("transaction still open in the partition log")
	}
	// The producer's next transaction, same epoch (transaction version 1).
	if code := txnCommit(c, "g", 7, 0, "t", 0, 12, txnCommitOpts{}); code != 0 {
		t.Fatalf("next transaction: %d", code)
	}
	wantUnstable(t, c, "g", "t", 0)
	pl.marker(7, 0, true)
	c.CompleteTxn(0, 7, true)
	wantOffset(t, c, "g", "t", 0, 12)
}

// A commit written after a transaction's offsets wins over them when the
// transaction commits; one written before loses (Kafka keeps the most
// recent record).
func TestTxnOffsetCommitKeepsNewerCommit(t *testing.T) {
	pl := openPartLog(t, vfs.NewCrashableMem())
	defer pl.l.Close()
	c := electLoaded(t, pl)
	commit(c, "g", "", -1, "t", 0, 1, "")
	txnCommit(c, "g", 7, 0, "t", 0, 10, txnCommitOpts{})
	commit(c, "g", "", -1, "t", 0, 20, "") // after the transaction's record
	txnCommit(c, "g", 7, 0, "t", 1, 30, txnCommitOpts{})
	pl.marker(7, 0, true)
	c.CompleteTxn(0, 7, true)
	wantOffset(t, c, "g", "t", 0, 20)
	wantOffset(t, c, "g", "t", 1, 30)

	// The same after a reload from the log.
	c.Resign(0)
	c2 := electLoaded(t, pl)
	wantOffset(t, c2, "g", "t", 0, 20)
	wantOffset(t, c2, "g", "t", 1, 30)
}

// A producer with an older epoch than the partition knows is refused by
// the partition log's producer state.
func TestTxnOffsetCommitStaleProducerEpoch(t *testing.T) {
	pl := openPartLog(t, vfs.NewCrashableMem())
	defer pl.l.Close()
	c := electLoaded(t, pl)
	if code := txnCommit(c, "g", 7, 3, "t", 0, 10, txnCommitOpts{}); code != 0 {
		t.Fatalf("txn commit: %d", code)
	}
	if code := txnCommit(c, "g", 7, 2, "t", 0, 11, txnCommitOpts{}); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older epoch: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if code := txnCommit(c, "g", -1, 0, "t", 0, 11, txnCommitOpts{}); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("no producer id: code %d, want INVALID_PRODUCER_ID_MAPPING", code)
	}
	if code := txnCommit(c, "", 7, 3, "t", 0, 11, txnCommitOpts{}); code != codeInvalidGroupID {
		t.Fatalf("empty group: code %d, want INVALID_GROUP_ID", code)
	}
	// The fenced commit left the pending offset as it was.
	pl.marker(7, 3, true)
	c.CompleteTxn(0, 7, true)
	wantOffset(t, c, "g", "t", 0, 10)
}

// KIP-447: a zombie member (old generation, unknown member, replaced
// static member) cannot commit offsets in a transaction; without member
// fields (v0-v2, or none given) the commit is accepted.
func TestTxnOffsetCommitFencesZombieMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, nil)
		ids, gen := stableGroup(t, c, "g", 2)
		cases := []struct {
			name string
			o    txnCommitOpts
			want int16
		}{
			{"current generation", txnCommitOpts{gen: gen, member: ids[0]}, 0},
			{"old generation", txnCommitOpts{gen: gen - 1, member: ids[0]}, codeIllegalGeneration},
			{"newer generation", txnCommitOpts{gen: gen + 1, member: ids[1]}, codeIllegalGeneration},
			{"unknown member", txnCommitOpts{gen: gen, member: "zombie"}, codeUnknownMemberID},
			{"generation without member", txnCommitOpts{gen: gen}, codeUnknownMemberID},
			{"unknown static member", txnCommitOpts{gen: gen, member: ids[0], instance: kmsg.StringPtr("i")}, codeUnknownMemberID},
			{"no member fields", txnCommitOpts{}, 0},
			{"v2", txnCommitOpts{version: 2, gen: gen - 1, member: "zombie"}, 0},
		}
		for i, tc := range cases {
			if code := txnCommit(c, "g", 7, 0, "t", int32(i), 1, tc.o); code != tc.want {
				t.Errorf("%s: code %d, want %d", tc.name, code, tc.want)
			}
		}
		if code := txnCommit(c, "nogroup", 7, 0, "t", 0, 1, txnCommitOpts{gen: 1, member: "m"}); code != codeIllegalGeneration {
			t.Errorf("unknown group with a generation: code %d, want ILLEGAL_GENERATION", code)
		}

		// A static member replaced by a newer process is fenced.
		inst := kmsg.StringPtr("host-1")
		ch := joinAsync(c, classicJoinReq("gs", joinOpts{instance: inst}))
		time.Sleep(200 * time.Millisecond)
		r := recv(t, ch)
		if r.ErrorCode != 0 {
			t.Fatalf("static join: %d", r.ErrorCode)
		}
		old, sgen := r.MemberID, r.Generation
		if s := recv(t, syncAsync(c, syncReq("gs", old, sgen, map[string][]byte{old: []byte("asg")}))); s.ErrorCode != 0 {
			t.Fatalf("sync: %d", s.ErrorCode)
		}
		if code := txnCommit(c, "gs", 8, 0, "t", 0, 1, txnCommitOpts{gen: sgen, member: old, instance: inst}); code != 0 {
			t.Fatalf("static member commit: %d", code)
		}
		r2 := recv(t, joinAsync(c, classicJoinReq("gs", joinOpts{instance: inst})))
		if r2.ErrorCode != 0 || r2.MemberID == old {
			t.Fatalf("rejoin: code %d member %s", r2.ErrorCode, r2.MemberID)
		}
		if code := txnCommit(c, "gs", 8, 0, "t", 0, 2, txnCommitOpts{gen: sgen, member: old, instance: inst}); code != codeFencedInstanceID {
			t.Fatalf("replaced static member: code %d, want FENCED_INSTANCE_ID", code)
		}
		if code := txnCommit(c, "gs", 8, 0, "t", 0, 3, txnCommitOpts{gen: sgen, member: r2.MemberID, instance: inst}); code != 0 {
			t.Fatalf("new static member: code %d", code)
		}
	})
}

// Loading replays transactional offsets and markers in log order: a
// commit or abort written before a failover (and never applied by the old
// coordinator) is honoured, a transaction still open stays pending, also
// after a restart of the partition log; its later marker completes it.
func TestTxnOffsetsAfterFailoverAndRestart(t *testing.T) {
	fs := vfs.NewCrashableMem()
	pl := openPartLog(t, fs)
	c1 := electLoaded(t, pl)
	for _, step := range []func() int16{
		func() int16 { return commit(c1, "g", "", -1, "t", 0, 1, "") },
		func() int16 { return txnCommit(c1, "g", 1, 0, "t", 0, 10, txnCommitOpts{}) },  // committed
		func() int16 { return txnCommit(c1, "g", 2, 0, "t", 1, 20, txnCommitOpts{}) },  // aborted
		func() int16 { return txnCommit(c1, "g", 3, 0, "t", 2, 30, txnCommitOpts{}) },  // open
		func() int16 { return txnCommit(c1, "g2", 1, 0, "u", 0, 40, txnCommitOpts{}) }, // committed, a group known only by it
	} {
		if code := step(); code != 0 {
			t.Fatalf("commit: %d", code)
		}
	}
	// The markers reach the log, then the coordinator moves before it
	// applied them.
	pl.marker(1, 0, true)
	pl.marker(2, 0, false)
	c1.Resign(0)

	check := func(c *Coordinator) {
		t.Helper()
		wantOffset(t, c, "g", "t", 0, 10)
		wantOffset(t, c, "g", "t", 1, -1)
		wantOffset(t, c, "g2", "u", 0, 40)
		if off, code := fetched(c, "g", "t", 2); code != 0 || off != -1 {
			t.Fatalf("open transaction's offset visible: %d code %d", off, code)
		}
		wantUnstable(t, c, "g", "t", 2)
		if p, ok := c.PendingTxnOffsets(0, 3); !ok || p["g"][TopicPartition{"t", 2}].Offset != 30 {
			t.Fatalf("pending offsets of producer 3: %v (loaded %v)", p, ok)
		}
	}
	c2 := electLoaded(t, pl)
	check(c2)
	c2.Close()

	// A restart: the partition log recovers from its files.
	if err := pl.l.Close(); err != nil {
		t.Fatal(err)
	}
	pl = openPartLog(t, fs)
	defer pl.l.Close()
	if _, ok := pl.l.OpenTransaction(3); !ok {
		t.Fatal("the open transaction is not open in the recovered partition log")
	}
	c3 := electLoaded(t, pl)
	check(c3)
	pl.marker(3, 0, true)
	c3.CompleteTxn(0, 3, true)
	wantOffset(t, c3, "g", "t", 2, 30)
	c3.Close()
	c4 := electLoaded(t, pl)
	wantOffset(t, c4, "g", "t", 2, 30)
	wantOffset(t, c4, "g", "t", 0, 10)
}

// A marker written while the partition loads, after the replay took the
// log end, is applied once loaded.
func TestTxnCompletionDuringLoad(t *testing.T) {
	pl := openPartLog(t, vfs.NewCrashableMem())
	defer pl.l.Close()
	c1 := electLoaded(t, pl)
	txnCommit(c1, "g", 5, 0, "t", 0, 50, txnCommitOpts{})
	txnCommit(c1, "g", 6, 0, "t", 1, 60, txnCommitOpts{})
	c1.Close()

	pl.gate, pl.atEnd = make(chan struct{}), make(chan struct{})
	c := New(testConfig())
	defer c.Close()
	c.Elect(0, pl)
	<-pl.atEnd
	pl.marker(5, 0, true)
	c.CompleteTxn(0, 5, true)
	pl.marker(6, 0, false)
	c.CompleteTxn(0, 6, false)
	if off, code := fetched(c, "g", "t", 0); code != codeCoordinatorLoadInProgress {
		t.Fatalf("fetch while loading: offset %d code %d", off, code)
	}
	close(pl.gate)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := c.PartitionOffsets(0); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not loaded")
		}
		time.Sleep(time.Millisecond)
	}
	wantOffset(t, c, "g", "t", 0, 50)
	wantOffset(t, c, "g", "t", 1, -1)
}

// Deleting offsets or the group drops pending transactional offsets (a
// later commit marker brings nothing back, also after a reload).
func TestTxnOffsetsDeletedWithTheGroup(t *testing.T) {
	pl := openPartLog(t, vfs.NewCrashableMem())
	defer pl.l.Close()
	c := electLoaded(t, pl)
	commit(c, "g", "", -1, "t", 0, 1, "")
	txnCommit(c, "g", 9, 0, "t", 0, 10, txnCommitOpts{})
	txnCommit(c, "g", 9, 0, "t", 1, 11, txnCommitOpts{})
	// OffsetDelete of a partition with only a pending offset.
	txnCommit(c, "od", 10, 0, "t", 0, 12, txnCommitOpts{})
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "od"
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = "t"
	odt.Partitions = append(odt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
	od.Topics = append(od.Topics, odt)
	if r := c.OffsetDelete(od); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	if off, code := stableFetch(c, "od", "t", 0); code != 0 || off != -1 {
		t.Fatalf("after OffsetDelete: %d code %d", off, code)
	}
	pl.marker(10, 0, true)
	c.CompleteTxn(0, 10, true)
	wantOffset(t, c, "od", "t", 0, -1)
	d := kmsg.NewPtrDeleteGroupsRequest()
	d.Groups = []string{"g"}
	if code := c.DeleteGroups(d).Groups[0].ErrorCode; code != 0 {
		t.Fatalf("delete group: %d", code)
	}
	pl.marker(9, 0, true)
	c.CompleteTxn(0, 9, true)
	wantOffset(t, c, "g", "t", 0, -1)
	wantOffset(t, c, "g", "t", 1, -1)
	c.Resign(0)
	c2 := electLoaded(t, pl)
	wantOffset(t, c2, "g", "t", 0, -1)
	wantOffset(t, c2, "g", "t", 1, -1)
	wantOffset(t, c2, "od", "t", 0, -1)
}

// Retention never expires an offset a pending transaction may commit,
// nor deletes its group.
func TestTxnOffsetsSurviveRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, nil)
		commit(c, "g", "", -1, "t", 0, 1, "")
		commit(c, "g", "", -1, "t", 5, 2, "")
		txnCommit(c, "g", 4, 0, "t", 0, 10, txnCommitOpts{})
		txnCommit(c, "h", 4, 0, "t", 0, 20, txnCommitOpts{}) // a group with only pending offsets
		time.Sleep(2 * time.Minute)                          // past offsets.retention (60s here)
		c.ExpireOffsets()
		wantOffset(t, c, "g", "t", 5, -1) // expired
		if off, _ := fetched(c, "g", "t", 0); off != 1 {
			t.Fatalf("offset with a pending transaction expired: %d", off)
		}
		l.Append(plog.ControlBatch(4, 0, plog.EndTxnMarker{Type: plog.ControlCommit}, 0))
		c.CompleteTxn(0, 4, true)
		wantOffset(t, c, "g", "t", 0, 10)
		wantOffset(t, c, "h", "t", 0, 20)
		// And so does a reload of the in-memory log.
		c.Close()
		c2 := startCoord(t, l, nil)
		wantOffset(t, c2, "g", "t", 0, 10)
		wantOffset(t, c2, "h", "t", 0, 20)
		wantOffset(t, c2, "g", "t", 5, -1)
	})
}

// KIP-848 consumer groups: a transactional commit naming a member must
// carry its epoch; one without member fields is accepted (Kafka's
// ConsumerGroup.validateOffsetCommit with isTransactional).
func TestTxnOffsetCommitConsumerGroup(t *testing.T) {
	topics := testTopics(map[string]int32{"a": 4})
	c := newTestCoordinator(t, ConsumerGroupConfig{SessionTimeout: time.Minute}, topics, &memLog{})
	waitCond(t, "partition loaded", func() bool {
		r, code := coordHB(t, c, topics, joinReq("m1", "a"))
		return code == 0 && r.ErrorCode == 0
	})
	for _, tc := range []struct {
		name string
		o    txnCommitOpts
		want int16
	}{
		{"member at its epoch", txnCommitOpts{gen: 1, member: "m1"}, 0},
		{"newer epoch", txnCommitOpts{gen: 2, member: "m1"}, kerr.StaleMemberEpoch.Code},
		{"unknown member", txnCommitOpts{gen: 1, member: "zombie"}, codeUnknownMemberID},
		{"no member fields", txnCommitOpts{}, 0},
	} {
		if code := txnCommit(c, "grp", 11, 0, "a", 0, 3, tc.o); code != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.want)
		}
	}
	wantUnstable(t, c, "grp", "a", 0)
	c.CompleteTxn(0, 11, true)
	wantOffset(t, c, "grp", "a", 0, 3)
}
