package txn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A coordinator that loads the log another one wrote knows every
// transactional id as the writer knew it (but the last epoch, which
// Kafka does not persist), and sends again the markers of the
// transactions that were ending.
func TestLoadReplayEquivalence(t *testing.T) {
	for _, tv := range []int16{0, 1, 2} {
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("tv%d/seed%d", tv, seed), func(t *testing.T) {
				f := newFixture(t, tv)
				f.c.cfg.TransactionalIDExpirationMs = 50_000
				rng := rand.New(rand.NewPCG(seed, 7))
				runRandomOps(t, f, rng, 300)

				want, _ := f.c.List(ListFilter{DurationMs: -1})
				pending := f.c.PendingMarkers(0)
				f.takeMarkers()

				g := &fixture{t: t, now: f.now, nextPID: 1_000_000}
				g.c = g.coordinator(tv)
				g.elect(g.c, f.log)
				got, _ := g.c.List(ListFilter{DurationMs: -1})
				if len(got) != len(want) {
					t.Fatalf("loaded %d ids, want %d", len(got), len(want))
				}
				for i := range want {
					w, l := comparable(want[i], tv), comparable(got[i], tv)
					if !reflect.DeepEqual(w, l) {
						t.Fatalf("id %s:\nwritten %+v\n loaded %+v", want[i].TransactionalID, w, l)
					}
				}
				// The markers are handed out right after the load is
				// installed.
				waitFor(t, "markers after load", func() bool {
					g.mu.Lock()
					defer g.mu.Unlock()
					return len(g.markers) >= len(pending)
				})
				resent := g.takeMarkers()
				byID := func(a, b Markers) int { return strings.Compare(a.TransactionalID, b.TransactionalID) }
				slices.SortFunc(resent, byID)
				slices.SortFunc(pending, byID)
				if !reflect.DeepEqual(resent, pending) {
					t.Fatalf("markers sent after load %+v, want %+v", resent, pending)
				}
				// The loaded coordinator goes on: complete what was ending.
				for _, m := range resent {
					wantCode(t, "CompleteTxn after load", g.c.CompleteTxn(m), eNone)
				}
			})
		}
	}
}

// comparable drops what a load cannot know: the last epoch (never
// persisted), and at transaction.version 0 the fields value v0 lacks.
func comparable(m Metadata, tv int16) Metadata {
	m.LastProducerEpoch = 0
	if tv == 0 {
		m.PreviousProducerID, m.NextProducerID, m.ClientTransactionVersion = 0, 0, 0
	}
	return m
}

// runRandomOps drives the coordinator with n random requests over a few
// ids, from producers that follow the protocol and from stale ones.
func runRandomOps(t *testing.T, f *fixture, rng *rand.Rand, n int) {
	t.Helper()
	ids := []string{"a", "b", "c", "d", "e", "f"}
	type producer struct {
		pid   int64
		epoch int16
		tv    int16
	}
	prods := map[string]producer{}
	for range n {
		id := ids[rng.IntN(len(ids))]
		p, known := prods[id]
		switch op := rng.IntN(10); {
		case op == 0 || !known:
			r := f.c.InitProducerID(id, int32(1000+rng.IntN(5000)), -1, -1)
			if r.Err == 0 {
				tv := int16(0)
				if f.c.cfg.TransactionVersion == 2 && rng.IntN(2) == 0 {
					tv = 2
				}
				prods[id] = producer{r.ProducerID, r.ProducerEpoch, tv}
			}
		case op <= 3:
			parts := []TopicPartition{tp("t", int32(rng.IntN(4))), tp(fmt.Sprint("u", rng.IntN(2)), int32(rng.IntN(3)))}
			f.c.AddPartitions(id, p.pid, p.epoch, parts, p.tv)
		case op == 4:
			f.c.AddOffsets(id, p.pid, p.epoch, fmt.Sprint("g", rng.IntN(3)))
		case op <= 6:
			r := f.c.EndTxn(id, p.pid, p.epoch, rng.IntN(2) == 0, p.tv)
			if r.Err == 0 && p.tv == 2 {
				prods[id] = producer{r.ProducerID, r.ProducerEpoch, p.tv}
			}
		case op == 7:
			// The marker writer finishes some of what is pending.
			ms := f.takeMarkers()
			for i, m := range ms {
				if rng.IntN(3) > 0 {
					f.c.CompleteTxn(m)
				} else {
					f.mu.Lock()
					f.markers = append(f.markers, ms[i])
					f.mu.Unlock()
				}
			}
		case op == 8:
			f.advance(int64(rng.IntN(4000)))
			f.c.AbortTimedOut()
		default:
			f.advance(int64(rng.IntN(20000)))
			f.c.ExpireTransactionalIDs()
		}
	}
}

// The loader's rules: the last value of a key wins, a tombstone deletes,
// keys of other versions are not ours, malformed records and states
// never written are skipped (and counted).
func TestApplyRecord(t *testing.T) {
	val := func(pid int64, st State) []byte {
		v := NewValue(1)
		v.ProducerID, v.Status, v.StartMs = pid, st, -1
		return EncodeValue(v)
	}
	loaded := map[string]txnState{}
	for i, tc := range []struct {
		r      Record
		ok     bool
		wantID string
		pid    int64 // of wantID after; -1 absent
	}{
		{Record{Key: EncodeKey("a"), Value: val(1, Empty)}, true, "a", 1},
		{Record{Key: EncodeKey("a"), Value: val(2, CompleteCommit)}, true, "a", 2},
		{Record{Key: []byte{0, 1, 0, 0}, Value: []byte("junk")}, true, "a", 2}, // another key version
		{Record{Key: EncodeKey("a"), Value: []byte{0, 1, 2}}, false, "a", 2},
		{Record{Key: EncodeKey("a"), Value: val(3, Dead)}, false, "a", 2},
		{Record{Key: EncodeKey("a"), Value: val(3, PrepareEpochFence)}, false, "a", 2},
		{Record{Key: EncodeKey("a"), Value: val(-5, Empty)}, false, "a", 2},
		{Record{Key: []byte{0}, Value: nil}, false, "a", 2},
		{Record{Key: EncodeKey("a"), Value: nil}, true, "a", -1},
		{Record{Key: EncodeKey("a"), Value: nil}, true, "a", -1}, // deleting what is gone
	} {
		if ok := applyRecord(loaded, tc.r); ok != tc.ok {
			t.Fatalf("%d: applyRecord = %v", i, ok)
		}
		st, ok := loaded[tc.wantID]
		if (tc.pid == -1) == ok || (ok && st.producerID != tc.pid) {
			t.Fatalf("%d: %q loaded as %+v (%v)", i, tc.wantID, st, ok)
		}
	}
}
