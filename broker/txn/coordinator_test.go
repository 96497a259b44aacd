package txn

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	eNone       int16 = 0
	eFenced           = kerr.ProducerFenced.Code
	eMapping          = kerr.InvalidProducerIDMapping.Code
	eConcurrent       = kerr.ConcurrentTransactions.Code
	eTxnState         = kerr.InvalidTxnState.Code
)

func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		id   string
		n    int32
		want int32
	}{
		{"", 50, 0},
		{"hello", 50, 99162322 % 50},             // "hello".hashCode() = 99162322
		{"polygenelubricants", 50, 0},            // hashCode() = Integer.MIN_VALUE, Utils.abs = 0
		{"\U0001F600", 50, 1772899 % 50},         // two UTF-16 units: 0xD83D*31 + 0xDE00
		{"Aa", 7, 2112 % 7}, {"BB", 7, 2112 % 7}, // Java's classic collision
		{"tx-negative-hash-zz", 50, javaAbsHash("tx-negative-hash-zz") % 50},
	} {
		if got := PartitionFor(tc.id, tc.n); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
}

// javaAbsHash is String.hashCode and Utils.abs written out on a byte
// string (ASCII only).
func javaAbsHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		h = h*31 + int32(s[i])
	}
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		return -h
	}
	return h
}

func TestInitProducerIDRequests(t *testing.T) {
	f := newFixture(t, 0)
	for _, tc := range []struct {
		name    string
		id      string
		timeout int32
		pid     int64
		epoch   int16
		want    int16
	}{
		{"empty id", "", 1000, -1, -1, kerr.InvalidRequest.Code},
		{"zero timeout", "a", 0, -1, -1, kerr.InvalidTransactionTimeout.Code},
		{"timeout over transaction.max.timeout.ms", "a", 60001, -1, -1, kerr.InvalidTransactionTimeout.Code},
		{"producer id without epoch", "a", 1000, 5, -1, kerr.InvalidRequest.Code},
		{"epoch without producer id", "a", 1000, -1, 0, kerr.InvalidRequest.Code},
	} {
		r := f.c.InitProducerID(tc.id, tc.timeout, tc.pid, tc.epoch)
		if r.Err != tc.want || r.ProducerID != -1 || r.ProducerEpoch != -1 {
			t.Errorf("%s: %+v, want %s", tc.name, r, errName(tc.want))
		}
	}
	r := f.c.InitProducerID("a", 60000, -1, -1)
	if r != (InitResult{1000, 0, 0}) {
		t.Fatalf("first init: %+v", r)
	}
	r = f.c.InitProducerID("a", 60000, -1, -1)
	if r != (InitResult{1000, 1, 0}) {
		t.Fatalf("second init: %+v", r)
	}
	if r := f.c.InitProducerID("b", 100, -1, -1); r != (InitResult{1001, 0, 0}) {
		t.Fatalf("other id: %+v", r)
	}
	// The allocator failing is COORDINATOR_NOT_AVAILABLE, as for
	// idempotent producers.
	f.pidErr = errors.New("controller down")
	if r := f.c.InitProducerID("c", 100, -1, -1); r.Err != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("allocator down: %+v", r)
	}
	md := f.describe("a")
	if md.State != Empty || md.TimeoutMs != 60000 || md.StartMs != -1 || md.Pending {
		t.Fatalf("described %+v", md)
	}
}

func TestNotCoordinatorAndLoading(t *testing.T) {
	f := &fixture{t: t, nextPID: 1}
	c := f.coordinator(2)
	c.SetNumPartitions(3)
	ids := map[int32]string{}
	for i := 0; len(ids) < 3; i++ {
		id := string(rune('a' + i))
		ids[c.PartitionFor(id)] = id
	}
	gate := make(chan struct{})
	c.Elect(1, 0, &memLog{replayGate: gate})
	c.Elect(2, 0, &memLog{})
	waitFor(t, "partition 2 loaded", func() bool { return c.Loaded(2) })

	wantCode(t, "unowned partition", c.InitProducerID(ids[0], 100, -1, -1).Err, kerr.NotCoordinator.Code)
	wantCode(t, "loading partition", c.InitProducerID(ids[1], 100, -1, -1).Err, kerr.CoordinatorLoadInProgress.Code)
	wantCode(t, "loading partition (EndTxn)", c.EndTxn(ids[1], 1, 0, true, 2).Err, kerr.CoordinatorLoadInProgress.Code)
	wantCode(t, "loaded partition", c.InitProducerID(ids[2], 100, -1, -1).Err, eNone)
	if _, loading := c.List(ListFilter{DurationMs: -1}); !loading {
		t.Fatal("List does not say a partition is loading")
	}
	close(gate)
	waitFor(t, "partition 1 loaded", func() bool { return c.Loaded(1) })
	wantCode(t, "loaded partition 1", c.InitProducerID(ids[1], 100, -1, -1).Err, eNone)
	if got := c.Owned(); !reflect.DeepEqual(got, []int32{1, 2}) {
		t.Fatalf("Owned = %v", got)
	}

	c.Resign(2)
	wantCode(t, "resigned", c.AddPartitions(ids[2], 1, 0, []TopicPartition{tp("t", 0)}, 0), kerr.NotCoordinator.Code)
	c.Close()
	wantCode(t, "closed", c.InitProducerID(ids[1], 100, -1, -1).Err, kerr.CoordinatorNotAvailable.Code)

	// A partition whose replay fails stays loading rather than serving a
	// partial state.
	c2 := f.coordinator(2)
	bad := &memLog{batches: [][]byte{encodeBatch([]Record{{Key: EncodeKey("x"), Value: EncodeValue(sampleValues()[0])}}, f.now)},
		replayErr: errors.New("disk")}
	s := newShard(c2, 0, 0, bad)
	s.load()
	if s.loaded || len(s.txns) != 0 {
		t.Fatalf("failed replay loaded %d ids", len(s.txns))
	}
	bad.replayErr = nil
	s.load()
	if !s.loaded || len(s.txns) != 1 {
		t.Fatalf("replay loaded %d ids", len(s.txns))
	}
}

// A whole transaction with transaction version 0/1: no epoch bump, and
// retries told apart by the state.
func TestTransactionV1(t *testing.T) {
	f := newFixture(t, 1)
	p := f.init("t1")
	f.add("t1", p, tp("a", 0), tp("b", 1))
	f.add("t1", p, tp("a", 0)) // already in: answered at once
	wantCode(t, "AddOffsets", f.c.AddOffsets("t1", p.ProducerID, p.ProducerEpoch, "grp"), eNone)
	md := f.describe("t1")
	wantParts := []TopicPartition{tp(OffsetsTopic, PartitionFor("grp", 50)), tp("a", 0), tp("b", 1)}
	if md.State != Ongoing || !reflect.DeepEqual(md.Partitions, wantParts) || md.StartMs != f.now.UnixMilli() {
		t.Fatalf("ongoing: %+v", md)
	}

	wantCode(t, "EndTxn by another producer id", f.c.EndTxn("t1", p.ProducerID+1, 0, true, 0).Err, eMapping)
	wantCode(t, "EndTxn at another epoch", f.c.EndTxn("t1", p.ProducerID, 1, true, 0).Err, eFenced)
	res := f.c.EndTxn("t1", p.ProducerID, p.ProducerEpoch, true, 0)
	if res.Err != 0 || res.ProducerID != -1 || res.ProducerEpoch != -1 || res.Markers == nil {
		t.Fatalf("EndTxn: %+v", res)
	}
	want := Markers{TransactionalID: "t1", ProducerID: p.ProducerID, ProducerEpoch: 0, CoordinatorEpoch: 5, Commit: true, Partitions: wantParts}
	if !reflect.DeepEqual(*res.Markers, want) {
		t.Fatalf("markers %+v, want %+v", *res.Markers, want)
	}
	wantCode(t, "commit retried while markers are written", f.c.EndTxn("t1", p.ProducerID, 0, true, 0).Err, eConcurrent)
	wantCode(t, "abort while committing", f.c.EndTxn("t1", p.ProducerID, 0, false, 0).Err, eTxnState)
	wantCode(t, "add while committing", f.c.AddPartitions("t1", p.ProducerID, 0, []TopicPartition{tp("c", 0)}, 0), eConcurrent)
	wantCode(t, "init while committing", f.c.InitProducerID("t1", 1000, -1, -1).Err, eConcurrent)

	wantCode(t, "CompleteTxn, stale coordinator epoch", f.c.CompleteTxn(Markers{TransactionalID: "t1", ProducerID: p.ProducerID, CoordinatorEpoch: 4, Commit: true}), kerr.NotCoordinator.Code)
	wantCode(t, "CompleteTxn, wrong result", f.c.CompleteTxn(Markers{TransactionalID: "t1", ProducerID: p.ProducerID, CoordinatorEpoch: 5}), eTxnState)
	f.completeAll()
	md = f.describe("t1")
	if md.State != CompleteCommit || len(md.Partitions) != 0 || md.ProducerEpoch != 0 {
		t.Fatalf("completed: %+v", md)
	}
	wantCode(t, "commit retried after completion", f.c.EndTxn("t1", p.ProducerID, 0, true, 0).Err, eNone)
	wantCode(t, "abort after commit", f.c.EndTxn("t1", p.ProducerID, 0, false, 0).Err, eTxnState)
	if m := f.takeMarkers(); len(m) != 0 {
		t.Fatalf("retries handed out markers %v", m)
	}
	// The next transaction starts with AddPartitions.
	f.add("t1", p, tp("a", 0))
	if md := f.describe("t1"); md.State != Ongoing || len(md.Partitions) != 1 {
		t.Fatalf("next: %+v", md)
	}
	// Empty does not end.
	q := f.init("t2")
	wantCode(t, "commit with nothing open", f.c.EndTxn("t2", q.ProducerID, q.ProducerEpoch, true, 0).Err, eTxnState)
	wantCode(t, "abort with nothing open", f.c.EndTxn("t2", q.ProducerID, q.ProducerEpoch, false, 0).Err, eTxnState)
	wantCode(t, "unknown id", f.c.EndTxn("t3", 1, 0, true, 0).Err, eMapping)
	wantCode(t, "unknown id (add)", f.c.AddPartitions("t3", 1, 0, []TopicPartition{tp("a", 0)}, 0), eMapping)
}

// Transaction version 2 (KIP-890 part 2): the epoch is bumped on every
// end, and Kafka's table decides what Empty, CompleteCommit and
// CompleteAbort answer to a retry (epoch one behind) or a current epoch.
func TestTransactionV2(t *testing.T) {
	f := newFixture(t, 2)
	p := f.init("t")
	f.add("t", p, tp("a", 0))
	res := f.c.EndTxn("t", p.ProducerID, 0, true, 2)
	if res.Err != 0 || res.ProducerID != p.ProducerID || res.ProducerEpoch != 1 || res.Markers.ProducerEpoch != 1 || res.Markers.TransactionVersion != 2 {
		t.Fatalf("EndTxn v5: %+v %+v", res, res.Markers)
	}
	wantCode(t, "retry while prepared", f.c.EndTxn("t", p.ProducerID, 0, true, 2).Err, eConcurrent)
	wantCode(t, "new epoch while prepared", f.c.EndTxn("t", p.ProducerID, 1, true, 2).Err, eFenced)
	wantCode(t, "next transaction's add while prepared", f.c.AddPartitions("t", p.ProducerID, 1, []TopicPartition{tp("a", 0)}, 2), eConcurrent)
	f.completeAll()
	if md := f.describe("t"); md.State != CompleteCommit || md.ProducerEpoch != 1 || md.ClientTransactionVersion != 2 {
		t.Fatalf("after commit: %+v", md)
	}
	r := f.c.EndTxn("t", p.ProducerID, 0, true, 2)
	if r.Err != 0 || r.ProducerEpoch != 1 || r.Markers != nil {
		t.Fatalf("retried commit: %+v", r)
	}

	type row struct {
		state  State
		commit bool
		retry  bool
		want   int16
		bump   bool
	}
	rows := []row{
		{Empty, false, true, eFenced, false}, {Empty, false, false, eNone, true},
		{Empty, true, true, eFenced, false}, {Empty, true, false, eTxnState, false},
		{CompleteAbort, false, true, eNone, false}, {CompleteAbort, false, false, eNone, true},
		{CompleteAbort, true, true, eTxnState, false}, {CompleteAbort, true, false, eTxnState, false},
		{CompleteCommit, false, true, eTxnState, false}, {CompleteCommit, false, false, eNone, true},
		{CompleteCommit, true, true, eNone, false}, {CompleteCommit, true, false, eTxnState, false},
	}
	for i, rw := range rows {
		id := "row-" + string(rune('a'+i))
		q := f.init(id)
		q.ProducerEpoch = 1
		f.c.InitProducerID(id, 1000, -1, -1) // epoch 1, Empty
		switch rw.state {
		case CompleteAbort, CompleteCommit:
			f.add(id, q, tp("a", 0))
			if r := f.c.EndTxn(id, q.ProducerID, 1, rw.state == CompleteCommit, 2); r.Err != 0 {
				t.Fatal(errName(r.Err))
			}
			f.completeAll()
			q.ProducerEpoch = 2
		}
		epoch := q.ProducerEpoch
		if rw.retry {
			epoch--
		}
		r := f.c.EndTxn(id, q.ProducerID, epoch, rw.commit, 2)
		if r.Err != rw.want {
			t.Errorf("%v commit=%v retry=%v: %s, want %s", rw.state, rw.commit, rw.retry, errName(r.Err), errName(rw.want))
			continue
		}
		if bumped := r.Markers != nil; bumped != rw.bump {
			t.Errorf("%v commit=%v retry=%v: bumped %v", rw.state, rw.commit, rw.retry, bumped)
			continue
		}
		if rw.bump {
			if r.ProducerEpoch != q.ProducerEpoch+1 || len(r.Markers.Partitions) != 0 || r.Markers.Commit {
				t.Errorf("%v abort: %+v %+v", rw.state, r, r.Markers)
			}
			f.completeAll()
			if md := f.describe(id); md.State != CompleteAbort || md.ProducerEpoch != q.ProducerEpoch+1 {
				t.Errorf("%v abort completed: %+v", rw.state, md)
			}
		} else if r.Err == 0 && r.ProducerEpoch != q.ProducerEpoch {
			t.Errorf("%v retry answered epoch %d, want %d", rw.state, r.ProducerEpoch, q.ProducerEpoch)
		}
	}
}

// A second producer of the same id fences the first: its open
// transaction is aborted at a bumped epoch, the first producer's requests
// are PRODUCER_FENCED, and the new one gets the epoch after.
func TestZombieFencing(t *testing.T) {
	for _, tc := range []struct {
		tv                  int16
		abortEpoch, nextOne int16
	}{
		{0, 1, 2}, // fence bump only
		{2, 2, 3}, // fence bump, then the abort's own bump
	} {
		f := newFixture(t, tc.tv)
		a := f.init("z")
		f.add("z", a, tp("t", 0), tp("t", 1))
		b := f.c.InitProducerID("z", 10000, -1, -1)
		wantCode(t, "new producer while the old one's transaction is open", b.Err, eConcurrent)
		ms := f.takeMarkers()
		if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != tc.abortEpoch || len(ms[0].Partitions) != 2 {
			t.Fatalf("tv %d: fence markers %+v", tc.tv, ms)
		}
		if md := f.describe("z"); md.State != PrepareAbort || md.ProducerEpoch != tc.abortEpoch {
			t.Fatalf("tv %d: fencing %+v", tc.tv, md)
		}
		wantCode(t, "zombie adds", f.c.AddPartitions("z", a.ProducerID, a.ProducerEpoch, []TopicPartition{tp("t", 2)}, 0), eFenced)
		wantCode(t, "zombie commits", f.c.EndTxn("z", a.ProducerID, a.ProducerEpoch, true, tc.tv).Err, eFenced)
		wantCode(t, "new producer retries before the abort completes", f.c.InitProducerID("z", 10000, -1, -1).Err, eConcurrent)
		for _, m := range ms {
			wantCode(t, "CompleteTxn", f.c.CompleteTxn(m), eNone)
		}
		b = f.c.InitProducerID("z", 10000, -1, -1)
		if b.Err != 0 || b.ProducerID != a.ProducerID || b.ProducerEpoch != tc.nextOne {
			t.Fatalf("tv %d: new producer %+v", tc.tv, b)
		}
		wantCode(t, "zombie after the new producer", f.c.AddPartitions("z", a.ProducerID, a.ProducerEpoch, []TopicPartition{tp("t", 0)}, 0), eFenced)
		// KIP-360: the zombie recovering with its old epoch is fenced too.
		wantCode(t, "zombie recovers", f.c.InitProducerID("z", 10000, a.ProducerID, a.ProducerEpoch).Err, eFenced)
		wantCode(t, "zombie of another producer id", f.c.InitProducerID("z", 10000, a.ProducerID+7, 0).Err, eFenced)
	}
}

// KIP-360: a producer recovering with its current producer id and epoch
// bumps; repeating the call (its answer lost) gets the same answer.
func TestInitProducerIDRecovery(t *testing.T) {
	f := newFixture(t, 0)
	p := f.init("r")
	q := f.c.InitProducerID("r", 10000, p.ProducerID, p.ProducerEpoch)
	if q.Err != 0 || q.ProducerID != p.ProducerID || q.ProducerEpoch != 1 {
		t.Fatalf("recovery: %+v", q)
	}
	again := f.c.InitProducerID("r", 10000, p.ProducerID, p.ProducerEpoch)
	if again != q {
		t.Fatalf("retried recovery: %+v, want %+v", again, q)
	}
	next := f.c.InitProducerID("r", 10000, q.ProducerID, q.ProducerEpoch)
	if next.Err != 0 || next.ProducerEpoch != 2 {
		t.Fatalf("next recovery: %+v", next)
	}
	// After a coordinator failover the last epoch is not known (Kafka does
	// not persist it): the retry of a success is fenced then.
	g := &fixture{t: t, log: f.log, now: f.now, nextPID: 5000}
	g.c = g.coordinator(0)
	g.elect(g.c, f.log)
	wantCode(t, "retry across a failover", g.c.InitProducerID("r", 10000, q.ProducerID, q.ProducerEpoch).Err, eFenced)
}

// Epoch exhaustion: InitProducerId moves the id to a new producer id; a
// retry by the previous producer at its exhausted epoch gets the new one.
func TestEpochExhaustionInit(t *testing.T) {
	f := newFixture(t, 0)
	p := f.init("x")
	setEpoch(t, f, "x", math.MaxInt16-1)
	q := f.c.InitProducerID("x", 10000, p.ProducerID, math.MaxInt16-1)
	if q.Err != 0 || q.ProducerID == p.ProducerID || q.ProducerEpoch != 0 {
		t.Fatalf("rotation: %+v", q)
	}
	md := f.describe("x")
	if md.PreviousProducerID != p.ProducerID || md.LastProducerEpoch != math.MaxInt16-1 {
		t.Fatalf("rotated: %+v", md)
	}
	retry := f.c.InitProducerID("x", 10000, p.ProducerID, math.MaxInt16-1)
	if retry != q {
		t.Fatalf("retry by the previous producer: %+v, want %+v", retry, q)
	}
	// Without an expectation the exhausted id rotates too.
	setEpoch(t, f, "x", math.MaxInt16-1)
	if r := f.c.InitProducerID("x", 10000, -1, -1); r.Err != 0 || r.ProducerEpoch != 0 || r.ProducerID == q.ProducerID {
		t.Fatalf("rotation without expectation: %+v", r)
	}
}

// Epoch exhaustion at EndTxn with transaction version 2: the producer is
// told its next producer id at epoch 0; the markers carry the old one at
// the last epoch; a retry at the exhausted epoch is recognized.
func TestEpochExhaustionEndTxnV2(t *testing.T) {
	f := newFixture(t, 2)
	p := f.init("x")
	f.add("x", p, tp("a", 0))
	setEpoch(t, f, "x", math.MaxInt16-1)
	r := f.c.EndTxn("x", p.ProducerID, math.MaxInt16-1, true, 2)
	if r.Err != 0 || r.ProducerID == p.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("EndTxn: %+v", r)
	}
	if r.Markers.ProducerID != p.ProducerID || r.Markers.ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers %+v", r.Markers)
	}
	// The producer moves on before the markers are written: told to wait.
	wantCode(t, "add with the next producer id", f.c.AddPartitions("x", r.ProducerID, 0, []TopicPartition{tp("a", 0)}, 2), eConcurrent)
	f.completeAll()
	md := f.describe("x")
	if md.ProducerID != r.ProducerID || md.ProducerEpoch != 0 || md.PreviousProducerID != p.ProducerID || md.NextProducerID != -1 {
		t.Fatalf("completed: %+v", md)
	}
	retry := f.c.EndTxn("x", p.ProducerID, math.MaxInt16-1, true, 2)
	if retry.Err != 0 || retry.ProducerID != r.ProducerID || retry.ProducerEpoch != 0 {
		t.Fatalf("retry across the overflow: %+v", retry)
	}
	f.add("x", InitResult{ProducerID: r.ProducerID}, tp("a", 0))
}

func setEpoch(t *testing.T, f *fixture, id string, epoch int16) {
	t.Helper()
	s, code := f.c.lockShard(id)
	if code != 0 {
		t.Fatal(errName(code))
	}
	s.txns[id].producerEpoch = epoch
	s.mu.Unlock()
}

func TestVerifyPartitions(t *testing.T) {
	f := newFixture(t, 2)
	p := f.init("v")
	f.add("v", p, tp("a", 0))
	got := f.c.VerifyPartitions("v", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp("a", 0), tp("a", 1)})
	want := map[TopicPartition]int16{tp("a", 0): 0, tp("a", 1): kerr.TransactionAbortable.Code}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("verify: %v", got)
	}
	for _, tc := range []struct {
		name  string
		pid   int64
		epoch int16
		want  int16
	}{
		{"other producer id", p.ProducerID + 1, 0, eMapping},
		{"old epoch", p.ProducerID, 5, eFenced},
	} {
		for _, code := range f.c.VerifyPartitions("v", tc.pid, tc.epoch, []TopicPartition{tp("a", 0)}) {
			wantCode(t, tc.name, code, tc.want)
		}
	}
	f.c.EndTxn("v", p.ProducerID, 0, true, 2)
	for _, code := range f.c.VerifyPartitions("v", p.ProducerID, 1, []TopicPartition{tp("a", 0)}) {
		wantCode(t, "ending", code, eConcurrent)
	}
}

// A failed write leaves the state as it was, nothing pending.
func TestWriteFailures(t *testing.T) {
	f := newFixture(t, 0)
	p := f.init("w")
	for _, tc := range []struct {
		name      string
		appendErr error
		waitErr   error
		want      int16
	}{
		{"append refused, not leader", kerr.NotLeaderForPartition, nil, kerr.NotCoordinator.Code},
		{"below min.insync.replicas", nil, kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable.Code},
		{"timed out", nil, kerr.RequestTimedOut, kerr.CoordinatorNotAvailable.Code},
		{"too large", kerr.MessageTooLarge, nil, kerr.UnknownServerError.Code},
	} {
		f.log.mu.Lock()
		f.log.appendErr, f.log.waitErr = tc.appendErr, tc.waitErr
		f.log.mu.Unlock()
		wantCode(t, tc.name, f.c.AddPartitions("w", p.ProducerID, 0, []TopicPartition{tp("a", 0)}, 0), tc.want)
		if md := f.describe("w"); md.State != Empty || md.Pending || len(md.Partitions) != 0 {
			t.Fatalf("%s: state after: %+v", tc.name, md)
		}
	}
	f.log.appendErr, f.log.waitErr = nil, nil
	f.add("w", p, tp("a", 0))

	// A fence whose write fails keeps the fenced epoch in memory (the old
	// producer stays fenced) and the next fence does not bump again.
	f.log.waitErr = kerr.NotEnoughReplicas
	wantCode(t, "fence not durable", f.c.InitProducerID("w", 10000, -1, -1).Err, kerr.CoordinatorNotAvailable.Code)
	f.log.waitErr = nil
	wantCode(t, "fenced producer", f.c.AddPartitions("w", p.ProducerID, 0, []TopicPartition{tp("a", 1)}, 0), eFenced)
	md := f.describe("w")
	if md.State != Ongoing || md.ProducerEpoch != 1 || md.Pending {
		t.Fatalf("after failed fence: %+v", md)
	}
	wantCode(t, "fence again", f.c.InitProducerID("w", 10000, -1, -1).Err, eConcurrent)
	if ms := f.takeMarkers(); len(ms) != 1 || ms[0].ProducerEpoch != 1 {
		t.Fatalf("second fence markers %+v", ms)
	}
}

// While a transition is being written, other requests for the id answer
// CONCURRENT_TRANSACTIONS; a coordinator that resigns meanwhile answers
// NOT_COORDINATOR and applies nothing.
func TestConcurrentAndResignDuringWrite(t *testing.T) {
	f := newFixture(t, 0)
	p := f.init("c")
	var during InitResult
	var duringEnd EndResult
	f.log.onWait = func() {
		during = f.c.InitProducerID("c", 10000, -1, -1)
		duringEnd = f.c.EndTxn("c", p.ProducerID, 0, false, 0)
	}
	f.add("c", p, tp("a", 0))
	wantCode(t, "init during a write", during.Err, eConcurrent)
	wantCode(t, "end during a write", duringEnd.Err, eConcurrent)

	f.log.onWait = func() { f.c.Resign(0) }
	wantCode(t, "resigned during the write", f.c.EndTxn("c", p.ProducerID, 0, true, 0).Err, kerr.NotCoordinator.Code)
	if ms := f.takeMarkers(); len(ms) != 0 {
		t.Fatalf("markers after resigning: %v", ms)
	}
	// The record is in the log: the next leader ends the transaction.
	f.elect(f.c, f.log)
	waitFor(t, "markers after re-election", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.markers) > 0
	})
	ms := f.takeMarkers()
	if len(ms) != 1 || !ms[0].Commit || ms[0].CoordinatorEpoch != 5 {
		t.Fatalf("markers after re-election: %+v", ms)
	}
}

func TestAbortTimedOut(t *testing.T) {
	for _, tv := range []int16{0, 2} {
		f := newFixture(t, tv)
		p := f.init("slow")
		q := f.init("fast")
		f.add("slow", p, tp("a", 0))
		f.advance(5000)
		f.add("fast", q, tp("a", 1))
		f.advance(5000) // slow started 10000 ms ago: not past yet
		if n := f.c.AbortTimedOut(); n != 0 {
			t.Fatalf("aborted %d at the timeout", n)
		}
		f.advance(1)
		if n := f.c.AbortTimedOut(); n != 1 {
			t.Fatalf("tv %d: aborted %d, want 1", tv, n)
		}
		ms := f.takeMarkers()
		if len(ms) != 1 || ms[0].TransactionalID != "slow" || ms[0].Commit || ms[0].ProducerEpoch <= p.ProducerEpoch {
			t.Fatalf("tv %d: markers %+v", tv, ms)
		}
		wantCode(t, "timed-out producer commits", f.c.EndTxn("slow", p.ProducerID, p.ProducerEpoch, true, tv).Err, eFenced)
		wantCode(t, "CompleteTxn", f.c.CompleteTxn(ms[0]), eNone)
		if md := f.describe("slow"); md.State != CompleteAbort {
			t.Fatalf("tv %d: %+v", tv, md)
		}
		if md := f.describe("fast"); md.State != Ongoing {
			t.Fatalf("tv %d: other transaction %+v", tv, md)
		}
		if n := f.c.AbortTimedOut(); n != 0 {
			t.Fatalf("aborted again: %d", n)
		}
	}
}

func TestExpireTransactionalIDs(t *testing.T) {
	f := newFixture(t, 2)
	f.c.cfg.TransactionalIDExpirationMs = 60000
	idle := f.init("idle")
	open := f.init("open")
	f.add("open", open, tp("a", 0))
	done := f.init("done")
	f.add("done", done, tp("a", 0))
	f.c.EndTxn("done", done.ProducerID, 0, false, 2)
	f.completeAll()
	f.advance(59999)
	if n := f.c.ExpireTransactionalIDs(); n != 0 {
		t.Fatalf("expired %d early", n)
	}
	f.advance(1)
	f.log.waitErr = kerr.NotEnoughReplicas
	if n := f.c.ExpireTransactionalIDs(); n != 0 {
		t.Fatalf("expired %d without a durable tombstone", n)
	}
	f.log.waitErr = nil
	if md := f.describe("idle"); md.Pending {
		t.Fatal("failed expiry left the id pending")
	}
	if n := f.c.ExpireTransactionalIDs(); n != 2 {
		t.Fatalf("expired %d, want 2 (idle and done)", n)
	}
	for _, id := range []string{"idle", "done"} {
		if _, code := f.c.Describe(id); code != kerr.TransactionalIDNotFound.Code {
			t.Fatalf("%s after expiry: %s", id, errName(code))
		}
	}
	if md := f.describe("open"); md.State != Ongoing {
		t.Fatalf("open transaction expired: %+v", md)
	}
	recs := f.log.records(t)
	tombs := 0
	for _, r := range recs {
		if r.Value == nil {
			tombs++
		}
	}
	if tombs != 4 { // two written by the failed pass, two by the good one
		t.Fatalf("%d tombstones in the log", tombs)
	}
	// An expired id starts over with a new producer id.
	if r := f.c.InitProducerID("idle", 1000, -1, -1); r.Err != 0 || r.ProducerID == idle.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("expired id re-initialized: %+v", r)
	}
}

func TestList(t *testing.T) {
	f := newFixture(t, 2)
	a := f.init("a")
	f.init("b")
	f.add("a", a, tp("t", 0))
	f.advance(100)
	got, loading := f.c.List(ListFilter{DurationMs: -1})
	if loading || len(got) != 2 || got[0].TransactionalID != "a" || got[1].TransactionalID != "b" {
		t.Fatalf("List all: %+v %v", got, loading)
	}
	for _, tc := range []struct {
		f    ListFilter
		want []string
	}{
		{ListFilter{States: []State{Ongoing}, DurationMs: -1}, []string{"a"}},
		{ListFilter{ProducerIDs: []int64{a.ProducerID + 1}, DurationMs: -1}, []string{"b"}},
		{ListFilter{DurationMs: 99, States: []State{Ongoing}}, []string{"a"}},
		{ListFilter{DurationMs: 100, States: []State{Ongoing}}, nil},
	} {
		got, _ := f.c.List(tc.f)
		var ids []string
		for _, m := range got {
			ids = append(ids, m.TransactionalID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.f, ids, tc.want)
		}
	}
}

// While the broker drains (RefuseNewTransactions), an open transaction
// may add partitions and end, but no transaction starts: adding to an
// Empty or completed id answers CONCURRENT_TRANSACTIONS, which clients
// retry, until the drain ends.
func TestRefuseNewTransactions(t *testing.T) {
	f := newFixture(t, 2)
	p := f.init("t")
	f.add("t", p, tp("a", 0))
	q := f.init("u")
	f.refuse.Store(true)
	f.add("t", p, tp("a", 1)) // the open transaction goes on
	wantCode(t, "a new transaction while draining", f.c.AddPartitions("u", q.ProducerID, q.ProducerEpoch, []TopicPartition{tp("a", 0)}, 0), eConcurrent)
	wantCode(t, "AddOffsets of a new transaction while draining", f.c.AddOffsets("u", q.ProducerID, q.ProducerEpoch, "g"), eConcurrent)
	if res := f.c.EndTxn("t", p.ProducerID, p.ProducerEpoch, true, 2); res.Err != 0 {
		t.Fatalf("commit while draining: %v", errName(res.Err))
	}
	f.completeAll()
	wantCode(t, "the next transaction while draining", f.c.AddPartitions("t", p.ProducerID, p.ProducerEpoch+1, []TopicPartition{tp("a", 0)}, 2), eConcurrent)
	if md := f.describe("u"); md.State != Empty {
		t.Fatalf("u after refused adds: %+v", md)
	}
	f.refuse.Store(false)
	f.add("u", q, tp("a", 0))
}
