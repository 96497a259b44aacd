package txn

import (
	"reflect"
	"testing"
)

// A partition's state taken out as records (PartitionRecords) loads into
// an empty partition as the same state; Merge takes into a loaded
// partition only the ids it lacks, writes them to its log, and sends the
// markers of a prepared one.
func TestPartitionRecordsAndMerge(t *testing.T) {
	f := newFixture(t, 2)
	committed := f.init("committed")
	f.add("committed", committed, tp("t", 0))
	if code := f.c.EndTxn("committed", committed.ProducerID, committed.ProducerEpoch, true, 0); code.Err != 0 {
		t.Fatalf("EndTxn: %v", errName(code.Err))
	}
	f.completeAll()
	prepared := f.init("prepared")
	f.add("prepared", prepared, tp("t", 1))
	if code := f.c.EndTxn("prepared", prepared.ProducerID, prepared.ProducerEpoch, false, 0); code.Err != 0 {
		t.Fatalf("EndTxn: %v", errName(code.Err))
	}
	f.takeMarkers() // left prepared
	f.init("empty")

	recs, ok := f.c.PartitionRecords(0)
	if !ok || len(recs) != 3 {
		t.Fatalf("PartitionRecords: %d records, %v", len(recs), ok)
	}
	if _, ok := f.c.PartitionRecords(1); ok {
		t.Fatal("PartitionRecords of a partition not owned")
	}
	for i, id := range []string{"committed", "empty", "prepared"} {
		if recs[i].TransactionalID != id {
			t.Fatalf("record %d is %s, want %s", i, recs[i].TransactionalID, id)
		}
		if got, err := CheckRecord(recs[i].Record); err != nil || got != id {
			t.Fatalf("CheckRecord(%s): %q, %v", id, got, err)
		}
	}
	if _, err := CheckRecord(Record{Key: EncodeKey("x"), Value: []byte{1}}); err == nil {
		t.Fatal("CheckRecord took a malformed value")
	}

	// Loaded from the records alone: the same state.
	fresh := &memLog{}
	if _, err := fresh.Append(EncodeRecords([]Record{recs[0].Record, recs[1].Record, recs[2].Record})); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, 2)
	c2 := g.coordinator(2)
	g.elect(c2, fresh)
	for _, id := range []string{"committed", "empty", "prepared"} {
		want, _ := f.c.Describe(id)
		got, code := c2.Describe(id)
		if code != 0 || !reflect.DeepEqual(comparable(got, 2), comparable(want, 2)) {
			t.Fatalf("%s loaded from the records: %+v (%s), want %+v", id, got, errName(code), want)
		}
	}

	// Merged into a partition that knows "committed" under another
	// producer: only the two others are taken in.
	h := newFixture(t, 2)
	mine := h.init("committed")
	before := len(h.log.records(t))
	h.takeMarkers()
	n, err := h.c.Merge(0, []Record{recs[0].Record, recs[1].Record, recs[2].Record})
	if err != nil || n != 2 {
		t.Fatalf("Merge: %d, %v; want 2", n, err)
	}
	if got := h.describe("committed"); got.ProducerID != mine.ProducerID {
		t.Fatalf("Merge replaced a known id: producer %d, want %d", got.ProducerID, mine.ProducerID)
	}
	if got := h.describe("prepared"); got.State != PrepareAbort || got.ProducerID != prepared.ProducerID {
		t.Fatalf("merged prepared: %+v", got)
	}
	if ms := h.takeMarkers(); len(ms) != 1 || ms[0].TransactionalID != "prepared" || ms[0].Commit {
		t.Fatalf("markers after the merge: %+v", ms)
	}
	if got := len(h.log.records(t)); got != before+2 {
		t.Fatalf("the log holds %d records after the merge, want %d", got, before+2)
	}
	if n, err := h.c.Merge(0, []Record{recs[0].Record, recs[1].Record, recs[2].Record}); err != nil || n != 0 {
		t.Fatalf("second Merge: %d, %v; want 0", n, err)
	}
}
