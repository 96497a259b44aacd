package replica

import (
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/internal/vfs"
)

// txnBatch is a batch of one record, transactional for producer pid >= 0.
func txnBatch(pid int64, seq int32) []byte {
	var attrs int16
	if pid >= 0 {
		attrs = 0x10
	}
	body := []byte{0, 0, 0, 1} // attributes, timestamp delta, offset delta, null key (-1)
	body = binary.AppendVarint(body, 1)
	body = append(body, 'v', 0) // value "v", no headers
	recs := binary.AppendVarint(nil, int64(len(body)))
	recs = append(recs, body...)
	rb := kmsg.RecordBatch{
		Length: int32(61 - 12 + len(recs)), PartitionLeaderEpoch: -1, Magic: 2,
		Attributes: attrs, ProducerID: pid, FirstSequence: seq, NumRecords: 1, Records: recs,
	}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// TestPartitionLastStableOffset: the LSO is the high watermark without
// transactions, the first offset of an open transaction below it, and
// moves past an ended transaction only once the high watermark passes
// its marker.
func TestPartitionLastStableOffset(t *testing.T) {
	m := vfs.NewCrashableMem()
	m.MkdirAll("t-0", 0o755)
	l, err := plog.Open(plog.Options{FS: m, Dir: "t-0", Config: plog.DefaultConfig(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := NewPartition("t", 0, [16]byte{}, l)
	if _, err := l.Append(txnBatch(-1, -1), 0); err != nil { // offset 0, plain
		t.Fatal(err)
	}
	p.SetHW(1)
	if got := p.LastStableOffset(); got != 1 {
		t.Fatalf("LSO without transactions %d, want the high watermark 1", got)
	}
	if _, err := l.Append(txnBatch(7, 0), 0); err != nil { // offset 1, opens 7's transaction
		t.Fatal(err)
	}
	p.SetHW(2)
	if got := p.LastStableOffset(); got != 1 {
		t.Fatalf("LSO with a transaction open at 1: %d", got)
	}
	if _, err := l.AppendControl(7, 0, plog.EndTxnMarker{Type: plog.ControlCommit}, 0, 0); err != nil { // offset 2
		t.Fatal(err)
	}
	if got := p.LastStableOffset(); got != 1 {
		t.Fatalf("LSO with the commit marker not below the high watermark: %d", got)
	}
	p.SetHW(3)
	if got := l.FirstUnstableOffset(); got != -1 {
		t.Fatalf("first unstable offset once the high watermark passed the marker: %d, want -1", got)
	}
	if got := p.LastStableOffset(); got != 3 {
		t.Fatalf("LSO once the marker is below the high watermark: %d, want 3", got)
	}
}
