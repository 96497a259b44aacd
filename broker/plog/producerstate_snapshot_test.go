package plog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

const psDir = "data/t-0"

func psNewFS(t *testing.T) *psMemFS {
	t.Helper()
	m := newPSMemFS()
	if err := m.MkdirAll(psDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// psRichState has several producers, a batch spanning the sequence wrap and a
// producer with more than five batches.
func psRichState() *ProducerState {
	p, _ := psSixBatches()
	p.Update(psBatch(7, 0, math.MaxInt32-1, 1, 300))
	p.Update(psBatch(7, 0, 2, 2, 304))
	p.Update(psBatch(3, 5, 0, 0, 305))
	return p
}

func psNames(t *testing.T, m *psMemFS) []string {
	t.Helper()
	names, err := m.ReadDir(psDir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	m := psNewFS(t)
	p := psRichState()
	if err := p.WriteSnapshot(m, psDir, 306); err != nil {
		t.Fatal(err)
	}
	if got, want := psNames(t, m), []string{"00000000000000000306.snapshot"}; !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
	m.crash() // the snapshot was made durable

	q := NewProducerState()
	q.Update(psBatch(99, 0, 0, 0, 0)) // replaced by the load
	off, err := q.LoadSnapshot(m, psDir, 306)
	if err != nil || off != 306 {
		t.Fatalf("LoadSnapshot = %d, %v", off, err)
	}
	if !reflect.DeepEqual(p.producers, q.producers) {
		t.Fatalf("loaded state differs:\n got %+v\nwant %+v", q.producers, p.producers)
	}
	// Every cached batch is still recognised as a duplicate.
	for id, e := range p.producers {
		for _, b := range e.batches {
			dup, err := q.Check(b)
			if err != nil || dup == nil || *dup != b {
				t.Fatalf("producer %d batch %+v: Check = %v, %v", id, b, dup, err)
			}
		}
	}
}

// TestProducerSnapshotKafkaLayout pins the byte layout of one entry to
// Kafka's producer snapshot schema (version 1).
func TestProducerSnapshotKafkaLayout(t *testing.T) {
	p := NewProducerState()
	p.Update(BatchMeta{ProducerID: 0x0102030405060708, ProducerEpoch: 9, FirstSeq: 10, LastSeq: 12,
		FirstOffset: 40, LastOffset: 42, MaxTimestamp: 1700000000000})
	got := encodeProducerSnapshot(p)

	want := []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1} // version, crc placeholder, count
	want = binary.BigEndian.AppendUint64(want, 0x0102030405060708)
	want = binary.BigEndian.AppendUint16(want, 9)
	want = binary.BigEndian.AppendUint32(want, 12)             // last sequence
	want = binary.BigEndian.AppendUint64(want, 42)             // last offset
	want = binary.BigEndian.AppendUint32(want, 2)              // offset delta
	want = binary.BigEndian.AppendUint64(want, 1700000000000)  // timestamp
	want = binary.BigEndian.AppendUint32(want, 0xffffffff)     // coordinator epoch -1
	want = binary.BigEndian.AppendUint64(want, math.MaxUint64) // current txn first offset -1
	binary.BigEndian.PutUint32(want[2:], crc32.Checksum(want[6:], crc32.MakeTable(crc32.Castagnoli)))
	if !slices.Equal(got, want) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want)
	}
}

func TestProducerSnapshotKafkaEntryWithoutBatch(t *testing.T) {
	// Kafka writes lastOffset -1 for a producer it knows only the epoch of.
	buf := []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1}
	buf = binary.BigEndian.AppendUint64(buf, 5)
	buf = binary.BigEndian.AppendUint16(buf, 3)
	buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // last seq -1
	buf = binary.BigEndian.AppendUint64(buf, math.MaxUint64) // last offset -1
	buf = binary.BigEndian.AppendUint32(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, 1234)
	buf = binary.BigEndian.AppendUint32(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, math.MaxUint64)
	binary.BigEndian.PutUint32(buf[2:], crc32.Checksum(buf[6:], producerSnapshotCRCTable))
	producers, err := decodeProducerSnapshot(buf)
	if err != nil {
		t.Fatal(err)
	}
	p := &ProducerState{producers: producers}
	if epoch, last, ok := p.Producer(5); !ok || epoch != 3 || last != -1 {
		t.Fatalf("Producer(5) = %d, %d, %v", epoch, last, ok)
	}
	if _, err := p.Check(psBatch(5, 3, 0, 0, 0)); err != nil {
		t.Fatalf("seq 0 after entry without batch: %v", err)
	}
	if _, err := p.Check(psBatch(5, 3, 4, 4, 0)); err == nil {
		t.Fatal("seq 4 after entry without batch accepted")
	}
}

func TestProducerSnapshotLoadChoosesAndCleans(t *testing.T) {
	m := psNewFS(t)
	p := NewProducerState()
	for _, off := range []int64{10, 20, 30} {
		p.Update(psBatch(1, 0, int32(off), int32(off), off-1))
		if err := p.WriteSnapshot(m, psDir, off); err != nil {
			t.Fatal(err)
		}
	}
	m.write(filepath.Join(psDir, "00000000000000000040.snapshot.tmp"), []byte("torn"))
	m.write(filepath.Join(psDir, "00000000000000000000.log"), nil) // not ours

	q := NewProducerState()
	off, err := q.LoadSnapshot(m, psDir, 25)
	if err != nil || off != 20 {
		t.Fatalf("LoadSnapshot(25) = %d, %v", off, err)
	}
	if _, last, _ := q.Producer(1); last != 20 {
		t.Fatalf("last seq = %d, want 20", last)
	}
	want := []string{"00000000000000000000.log", "00000000000000000010.snapshot", "00000000000000000020.snapshot"}
	if got := psNames(t, m); !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}

	if err := DeleteSnapshotsBefore(m, psDir, 20); err != nil {
		t.Fatal(err)
	}
	want = []string{"00000000000000000000.log", "00000000000000000020.snapshot"}
	if got := psNames(t, m); !slices.Equal(got, want) {
		t.Fatalf("after DeleteSnapshotsBefore files = %q, want %q", got, want)
	}

	off, err = q.LoadSnapshot(m, psDir, 5)
	if err != nil || off != -1 || q.Len() != 0 {
		t.Fatalf("LoadSnapshot(5) = %d, %v, Len %d; want -1, nil, 0", off, err, q.Len())
	}
	if off, err := q.LoadSnapshot(m, "no/such/dir", 100); err != nil || off != -1 {
		t.Fatalf("LoadSnapshot(missing dir) = %d, %v", off, err)
	}
	if err := DeleteSnapshotsBefore(m, "no/such/dir", 100); err != nil {
		t.Fatalf("DeleteSnapshotsBefore(missing dir) = %v", err)
	}
}

func TestProducerSnapshotCorruptFallsBack(t *testing.T) {
	corruptions := map[string]func([]byte) []byte{
		"crc mismatch":  func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"short":         func(b []byte) []byte { return b[:len(b)-3] },
		"header only":   func(b []byte) []byte { return b[:5] },
		"empty":         func(b []byte) []byte { return nil },
		"wrong version": func(b []byte) []byte { b[1] = 2; return b },
		"trailing byte": func(b []byte) []byte { return append(b, 0) },
	}
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			m := psNewFS(t)
			p := NewProducerState()
			p.Update(psBatch(1, 0, 0, 4, 0))
			if err := p.WriteSnapshot(m, psDir, 5); err != nil {
				t.Fatal(err)
			}
			p.Update(psBatch(1, 0, 5, 9, 5))
			if err := p.WriteSnapshot(m, psDir, 10); err != nil {
				t.Fatal(err)
			}
			newest := filepath.Join(psDir, producerSnapshotName(10))
			m.write(newest, corrupt(m.read(newest)))

			q := NewProducerState()
			off, err := q.LoadSnapshot(m, psDir, 100)
			if err != nil || off != 5 {
				t.Fatalf("LoadSnapshot = %d, %v; want 5", off, err)
			}
			if _, last, _ := q.Producer(1); last != 4 {
				t.Fatalf("last seq %d, want 4", last)
			}
			if got := psNames(t, m); !slices.Equal(got, []string{producerSnapshotName(5)}) {
				t.Fatalf("corrupt snapshot not deleted: %q", got)
			}
		})
	}
}

func TestProducerSnapshotWriteFailures(t *testing.T) {
	for _, op := range []string{"open", "write", "sync", "rename"} {
		t.Run(op, func(t *testing.T) {
			m := psNewFS(t)
			p := NewProducerState()
			p.Update(psBatch(1, 0, 0, 4, 0))
			if err := p.WriteSnapshot(m, psDir, 5); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("boom")
			m.fail = func(o, name string) error {
				if o == op {
					return boom
				}
				return nil
			}
			p.Update(psBatch(1, 0, 5, 9, 5))
			if err := p.WriteSnapshot(m, psDir, 10); !errors.Is(err, boom) {
				t.Fatalf("WriteSnapshot = %v, want boom", err)
			}
			m.fail = nil
			if got := psNames(t, m); !slices.Equal(got, []string{producerSnapshotName(5)}) {
				t.Fatalf("files after failed write = %q", got)
			}
		})
	}
}

// TestProducerSnapshotCrashBeforeDirSync: a snapshot whose rename was not
// made durable disappears in a crash, and the older one is loaded.
func TestProducerSnapshotCrashBeforeDirSync(t *testing.T) {
	m := psNewFS(t)
	p := NewProducerState()
	p.Update(psBatch(1, 0, 0, 4, 0))
	if err := p.WriteSnapshot(m, psDir, 5); err != nil {
		t.Fatal(err)
	}
	m.fail = func(op, _ string) error {
		if op == "syncdir" {
			return errors.New("power cut")
		}
		return nil
	}
	p.Update(psBatch(1, 0, 5, 9, 5))
	if err := p.WriteSnapshot(m, psDir, 10); err == nil {
		t.Fatal("WriteSnapshot succeeded without a dir sync")
	}
	m.fail = nil
	m.crash()
	q := NewProducerState()
	if off, err := q.LoadSnapshot(m, psDir, 100); err != nil || off != 5 {
		t.Fatalf("LoadSnapshot after crash = %d, %v; want 5", off, err)
	}
}

func TestProducerSnapshotName(t *testing.T) {
	for name, want := range map[string]int64{
		"00000000000000000042.snapshot": 42,
		"7.snapshot":                    7,
	} {
		if got, ok := parseProducerSnapshotName(name); !ok || got != want {
			t.Errorf("parse %q = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{".snapshot", "-1.snapshot", "1a.snapshot", "00000000000000000042.snapshot.tmp",
		"99999999999999999999.snapshot", "00000000000000000042.log"} {
		if _, ok := parseProducerSnapshotName(name); ok {
			t.Errorf("parse %q accepted", name)
		}
	}
}

func FuzzDecodeProducerSnapshot(f *testing.F) {
	f.Add(encodeProducerSnapshot(psRichState()))
	f.Add(encodeProducerSnapshot(NewProducerState()))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, buf []byte) {
		producers, err := decodeProducerSnapshot(buf)
		if err != nil {
			if !errors.Is(err, errCorruptProducerSnapshot) {
				t.Fatalf("error %v does not wrap errCorruptProducerSnapshot", err)
			}
			return
		}
		// Whatever decodes re-encodes to the same state.
		p := &ProducerState{producers: producers}
		again, err := decodeProducerSnapshot(encodeProducerSnapshot(p))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(again) != len(producers) {
			t.Fatalf("re-decode has %d producers, want %d", len(again), len(producers))
		}
		for id, e := range producers {
			a := again[id]
			if a == nil || a.epoch != e.epoch || a.lastTimestamp != e.lastTimestamp || !slices.Equal(a.batches, e.batches) {
				t.Fatalf("producer %d: re-decoded %+v, want %+v", id, a, e)
			}
			if len(e.batches) > producerBatchesKept {
				t.Fatalf("producer %d has %d batches", id, len(e.batches))
			}
		}
	})
}
