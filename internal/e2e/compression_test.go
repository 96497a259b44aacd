package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// codecCase is one compression codec, by its kcat/librdkafka name, its
// franz-go form, and the codec id in a batch's attributes.
type codecCase struct {
	name  string
	codec kgo.CompressionCodec
	id    int8
}

var codecs = []codecCase{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// TestCompressionCodecsFranz produces with each codec through franz-go and
// checks that a separate consumer reads back every record bit for bit
// (key, value, headers, timestamp, partition, offset; null keys stay null),
// and that the broker stores and serves the batches with the producer's
// codec (batches are kept verbatim).
func TestCompressionCodecsFranz(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{})
	for _, cc := range codecs {
		t.Run(cc.name, func(t *testing.T) {
			topic := "franz-codec-" + cc.name
			createTopic(t, b.Addr(), topic, 2, nil)
			rng := rand.New(rand.NewPCG(uint64(cc.id), 7))
			const n = 400
			recs := make([]*kgo.Record, n)
			base := time.Now().Truncate(time.Millisecond)
			for i := range recs {
				recs[i] = randomRecord(rng, topic, i, base)
			}
			cl := newClient(t, b.Addr(),
				kgo.ProducerBatchCompression(cc.codec),
				kgo.ProducerLinger(20*time.Millisecond),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
			)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			_, end := offsets(t, b.Addr(), topic)
			got := consumeAll(t, b.Addr(), topic, end)
			compareRecords(t, recs, got)
			for p := range end {
				for i, id := range batchCodecs(t, b.Addr(), topic, p, end[p]) {
					if id != cc.id {
						t.Errorf("partition %d batch %d: stored codec %d, want %d (%s)", p, i, id, cc.id, cc.name)
					}
				}
			}
		})
	}
}

// randomRecord makes record i: a mix of compressible and random bytes,
// null and empty keys, binary headers, an explicit timestamp and partition.
func randomRecord(rng *rand.Rand, topic string, i int, base time.Time) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
	switch i % 5 {
	case 0: // null key
	case 1:
		r.Key = []byte{}
	default:
		r.Key = randBytes(rng, 1+rng.IntN(40))
	}
	// Every value compresses well on its own, so that producers keep the
	// codec even for a batch of one record (they send a batch uncompressed
	// when compressing does not shrink it).
	var v []byte
	switch i % 3 {
	case 0:
		v = bytes.Repeat([]byte(fmt.Sprintf("record %d of the compression test; ", i)), 10+rng.IntN(60))
	case 1:
		v = append(randBytes(rng, rng.IntN(300)), bytes.Repeat([]byte("abcdefgh"), 100+rng.IntN(300))...)
	default:
		v = append(randBytes(rng, 8), bytes.Repeat([]byte{0}, 500+rng.IntN(2000))...)
	}
	r.Value = v
	for h := range i % 4 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprintf("h%d", h), Value: randBytes(rng, rng.IntN(20))})
	}
	return r
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// compareRecords checks that got (ordered by partition, offset) holds
// exactly the produced records at the offsets their produce returned.
func compareRecords(t testing.TB, want, got []*kgo.Record) {
	t.Helper()
	type po struct {
		p int32
		o int64
	}
	byPos := map[po]*kgo.Record{}
	for _, r := range got {
		if _, dup := byPos[po{r.Partition, r.Offset}]; dup {
			t.Errorf("partition %d offset %d consumed twice", r.Partition, r.Offset)
		}
		byPos[po{r.Partition, r.Offset}] = r
	}
	if len(got) != len(want) {
		t.Errorf("consumed %d records, produced %d", len(got), len(want))
	}
	bad := 0
	for i, w := range want {
		g := byPos[po{w.Partition, w.Offset}]
		if diff := recordDiff(w, g); diff != "" {
			bad++
			if bad <= 5 {
				t.Errorf("record %d (partition %d offset %d): %s", i, w.Partition, w.Offset, diff)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d records differ in all", bad)
	}
}

// recordDiff describes how g differs from w, or returns "".
func recordDiff(w, g *kgo.Record) string {
	switch {
	case g == nil:
		return "missing"
	case (w.Key == nil) != (g.Key == nil) || !bytes.Equal(w.Key, g.Key):
		return fmt.Sprintf("key %q (nil %v), want %q (nil %v)", trunc(g.Key), g.Key == nil, trunc(w.Key), w.Key == nil)
	case !bytes.Equal(w.Value, g.Value):
		return fmt.Sprintf("value %q (%d bytes), want %q (%d bytes)", trunc(g.Value), len(g.Value), trunc(w.Value), len(w.Value))
	case len(w.Headers) != len(g.Headers):
		return fmt.Sprintf("%d headers, want %d", len(g.Headers), len(w.Headers))
	case !w.Timestamp.Equal(g.Timestamp):
		return fmt.Sprintf("timestamp %v, want %v", g.Timestamp, w.Timestamp)
	}
	for i := range w.Headers {
		if w.Headers[i].Key != g.Headers[i].Key || !bytes.Equal(w.Headers[i].Value, g.Headers[i].Value) {
			return fmt.Sprintf("header %d = %q:%q, want %q:%q", i, g.Headers[i].Key, g.Headers[i].Value, w.Headers[i].Key, w.Headers[i].Value)
		}
	}
	return ""
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
