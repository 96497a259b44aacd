package broker

import (
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/internal/vfs"
)

// FuzzProduceRecords runs a partition's records bytes through the whole
// produce validation (checkProduceRecords, then the log's Append with its
// record walk and decompression) on an in-memory log. It never panics; a
// refusal carries a Kafka error code other than UNKNOWN_SERVER_ERROR and
// leaves the log empty; an accepted batch is well formed by an
// independent reading (kmsg and franz-go's decompressor): exactly its
// counted records, offset deltas 0..n-1, no bytes left over, its max
// timestamp its records' largest, and the log end moved by the count.
// With fix, the length and CRC are set right first, so that mutations
// reach the records. Seeds: testdata/fuzz/FuzzProduceRecords and the
// batches below.
func FuzzProduceRecords(f *testing.F) {
	for _, c := range protoCodecs {
		bs := plainBatch(1_700_000_000_000)
		bs.codec = c.codec
		for i := 0; i < 4; i++ {
			bs.records = append(bs.records, recordSpec{key: []byte{byte('a' + i)}, value: []byte("value"), tsDelta: int64(i)})
		}
		f.Add(bs.build(f), false)
		f.Add(bs.build(f), true)
	}
	f.Add(idemBatch(7, 0, 3, "x", "y").build(f), true)
	f.Add(rawFrame(nil, 1_000_000_000, 0, 1000, -1, -1), false)
	f.Add(rawFrame(lieRecords(2), math.MaxInt32, 0, 1000, -1, -1), true)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, records []byte, fix bool) {
		m := vfs.NewCrashableMem()
		m.MkdirAll("t-0", 0o755)
		cfg := plog.DefaultConfig()
		l, err := plog.Open(plog.Options{FS: m, Dir: "t-0", Config: cfg, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		in := append([]byte(nil), records...)
		if fix && len(in) >= 21 {
			binary.BigEndian.PutUint32(in[8:], uint32(len(in)-12))
			binary.BigEndian.PutUint32(in[17:], crc32.Checksum(in[21:], crc32c))
		}
		if code, _ := checkProduceRecords(in); code != 0 {
			return
		}
		info, err := l.Append(in, 0)
		if err != nil {
			if code := errCode(err); code == kerr.UnknownServerError.Code {
				t.Fatalf("refused without a Kafka error code: %v", err)
			}
			if leo := l.LogEndOffset(); leo != 0 {
				t.Fatalf("refused batch moved the log end to %d: %v", leo, err)
			}
			return
		}
		n, maxTs := independentRecords(t, in)
		if info.NumRecords != n || info.FirstOffset != 0 || info.LastOffset != n-1 || l.LogEndOffset() != n {
			t.Fatalf("accepted %+v, log end %d; the batch holds %d records", info, l.LogEndOffset(), n)
		}
		if got := int64(binary.BigEndian.Uint64(in[35:])); got != maxTs && cfg.TimestampType == plog.CreateTime {
			t.Fatalf("stored max timestamp %d, records' largest %d", got, maxTs)
		}
	})
}

// independentRecords parses an accepted batch without plog: it must be
// one well-formed batch; it returns its record count and largest record
// timestamp (at least -1).
func independentRecords(t *testing.T, b []byte) (int64, int64) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("accepted batch does not parse: %v", err)
	}
	data, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
	if err != nil {
		t.Fatalf("accepted batch does not decompress: %v", err)
	}
	maxTs := int64(-1)
	var n int64
	for ; len(data) > 0; n++ {
		length, k := binary.Varint(data)
		if k <= 0 || length < 0 || int64(len(data)-k) < length {
			t.Fatalf("accepted batch: record %d has a bad length", n)
		}
		var r kmsg.Record
		if err := r.ReadFrom(data[:k+int(length)]); err != nil {
			t.Fatalf("accepted batch: record %d: %v", n, err)
		}
		if int64(r.OffsetDelta) != n {
			t.Fatalf("accepted batch: record %d has offset delta %d", n, r.OffsetDelta)
		}
		maxTs = max(maxTs, rb.FirstTimestamp+r.TimestampDelta64)
		data = data[k+int(length):]
	}
	if n != int64(rb.NumRecords) {
		t.Fatalf("accepted batch holds %d records, its header counts %d", n, rb.NumRecords)
	}
	if n == 0 {
		t.Fatal("accepted an empty batch")
	}
	return n, maxTs
}
