package plog

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// batch builds the metadata of a batch of producer pid with sequences
// first..last (wrapping) starting at offset off.
func psBatch(pid int64, epoch int16, first, last int32, off int64) BatchMeta {
	n := int64(last) - int64(first)
	if n < 0 {
		n += math.MaxInt32 + 1
	}
	return BatchMeta{ProducerID: pid, ProducerEpoch: epoch, FirstSeq: first, LastSeq: last,
		FirstOffset: off, LastOffset: off + n, MaxTimestamp: 1000 + off}
}

// psSixBatches returns state where producer 1 (epoch 2) appended sequences
// 0..29 in batches of five, at offsets 100..129; the first batch has left
// the cache.
func psSixBatches() (*ProducerState, []BatchMeta) {
	p := NewProducerState()
	var bs []BatchMeta
	for i := int32(0); i < 6; i++ {
		b := psBatch(1, 2, i*5, i*5+4, 100+int64(i)*5)
		p.Update(b)
		bs = append(bs, b)
	}
	return p, bs
}

func TestProducerStateCheck(t *testing.T) {
	_, bs := psSixBatches()
	tests := []struct {
		name    string
		setup   []BatchMeta // appended after psSixBatches
		in      BatchMeta
		dup     *BatchMeta
		wantErr error
	}{
		{name: "non-idempotent batch", in: psBatch(-1, -1, -1, -1, 0)},
		{name: "unknown producer seq 0", in: psBatch(9, 0, 0, 3, 0)},
		{name: "unknown producer any seq (KIP-360)", in: psBatch(9, 0, 77, 80, 0)},
		{name: "dup of 5th last", in: psBatch(1, 2, 5, 9, 0), dup: &bs[1]},
		{name: "dup of 4th last", in: psBatch(1, 2, 10, 14, 0), dup: &bs[2]},
		{name: "dup of 3rd last", in: psBatch(1, 2, 15, 19, 0), dup: &bs[3]},
		{name: "dup of 2nd last", in: psBatch(1, 2, 20, 24, 0), dup: &bs[4]},
		{name: "dup of last", in: psBatch(1, 2, 25, 29, 0), dup: &bs[5]},
		{name: "evicted batch is out of order", in: psBatch(1, 2, 0, 4, 0), wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "partial overlap", in: psBatch(1, 2, 25, 34, 0), wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "next in sequence", in: psBatch(1, 2, 30, 31, 0)},
		{name: "gap", in: psBatch(1, 2, 31, 32, 0), wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "stale epoch", in: psBatch(1, 1, 30, 31, 0), wantErr: kerr.InvalidProducerEpoch},
		{name: "stale epoch with dup sequences", in: psBatch(1, 1, 25, 29, 0), wantErr: kerr.InvalidProducerEpoch},
		{name: "epoch bump at seq 0", in: psBatch(1, 3, 0, 4, 0)},
		{name: "epoch bump not at seq 0", in: psBatch(1, 3, 30, 31, 0), wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "epoch bump with an old batch's sequences is no dup", in: psBatch(1, 3, 25, 29, 0), wantErr: kerr.OutOfOrderSequenceNumber},
		{
			name:  "wraparound after MaxInt32",
			setup: []BatchMeta{psBatch(2, 0, math.MaxInt32-3, math.MaxInt32, 500)},
			in:    psBatch(2, 0, 0, 9, 0),
		},
		{
			name:    "wraparound must restart at 0",
			setup:   []BatchMeta{psBatch(2, 0, math.MaxInt32-3, math.MaxInt32, 500)},
			in:      psBatch(2, 0, 1, 9, 0),
			wantErr: kerr.OutOfOrderSequenceNumber,
		},
		{
			name:  "batch spanning the wrap, then next",
			setup: []BatchMeta{psBatch(2, 0, math.MaxInt32-1, 1, 500)},
			in:    psBatch(2, 0, 2, 3, 0),
		},
		{
			name:  "batch spanning the wrap is a dup",
			setup: []BatchMeta{psBatch(2, 0, math.MaxInt32-1, 1, 500)},
			in:    psBatch(2, 0, math.MaxInt32-1, 1, 0),
			dup:   psPtr(psBatch(2, 0, math.MaxInt32-1, 1, 500)),
		},
		{
			name:  "after an epoch bump the old batches are gone",
			setup: []BatchMeta{psBatch(1, 3, 0, 4, 200)},
			in:    psBatch(1, 3, 5, 9, 0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := psSixBatches()
			for _, b := range tt.setup {
				p.Update(b)
			}
			before := encodeProducerSnapshot(p)
			dup, err := p.Check(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Check = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Check: %v", err)
			}
			switch {
			case tt.dup == nil && dup != nil:
				t.Fatalf("Check returned dup %+v, want none", *dup)
			case tt.dup != nil && (dup == nil || *dup != *tt.dup):
				t.Fatalf("Check dup = %v, want %+v", dup, *tt.dup)
			}
			if string(encodeProducerSnapshot(p)) != string(before) {
				t.Fatal("Check changed the state")
			}
		})
	}
}

func psPtr[T any](v T) *T { return &v }

func TestProducerStateUpdate(t *testing.T) {
	p, bs := psSixBatches()
	if p.Len() != 1 {
		t.Fatalf("Len = %d", p.Len())
	}
	e := p.producers[1]
	if len(e.batches) != producerBatchesKept || e.batches[0] != bs[1] || e.batches[4] != bs[5] {
		t.Fatalf("cached batches = %+v", e.batches)
	}
	if epoch, last, ok := p.Producer(1); !ok || epoch != 2 || last != 29 {
		t.Fatalf("Producer(1) = %d, %d, %v", epoch, last, ok)
	}
	if _, _, ok := p.Producer(7); ok {
		t.Fatal("Producer(7) found")
	}

	p.Update(psBatch(-1, -1, -1, -1, 300)) // ignored
	if p.Len() != 1 {
		t.Fatalf("Len after non-idempotent batch = %d", p.Len())
	}

	p.Update(psBatch(1, 3, 0, 1, 200))
	if epoch, last, _ := p.Producer(1); epoch != 3 || last != 1 || len(p.producers[1].batches) != 1 {
		t.Fatalf("after epoch bump: epoch %d last %d batches %d", epoch, last, len(p.producers[1].batches))
	}

	// A zero ProducerState works too.
	var z ProducerState
	z.Update(psBatch(4, 0, 0, 0, 0))
	if z.Len() != 1 {
		t.Fatal("zero ProducerState did not record")
	}
}

func TestProducerStateExpire(t *testing.T) {
	p := NewProducerState()
	p.Update(BatchMeta{ProducerID: 1, LastSeq: 0, MaxTimestamp: 1000})
	p.Update(BatchMeta{ProducerID: 2, LastSeq: 0, MaxTimestamp: 2000})
	p.ExpireProducers(2999, 1000) // producer 1 is exactly maxAge old: expired, like Kafka
	if _, _, ok := p.Producer(1); ok {
		t.Fatal("producer 1 not expired")
	}
	if _, _, ok := p.Producer(2); !ok {
		t.Fatal("producer 2 expired")
	}
}

func TestProducerStateTruncateHead(t *testing.T) {
	p, _ := psSixBatches() // producer 1 cached batches at 105..129
	p.Update(psBatch(2, 0, 0, 4, 90))
	p.truncateHead(112)
	if _, _, ok := p.Producer(2); ok {
		t.Fatal("producer 2 (last offset 94) kept")
	}
	if got := len(p.producers[1].batches); got != 4 { // 105-109 dropped, 110-114 kept
		t.Fatalf("producer 1 keeps %d batches, want 4", got)
	}
	// An unknown producer may start anywhere again.
	if _, err := p.Check(psBatch(2, 0, 40, 41, 0)); err != nil {
		t.Fatalf("Check after truncateHead: %v", err)
	}
}
