package plog

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"testing"

	"strata/internal/vfs"
)

// FuzzValidateBatch: the produce-path validator never panics, and a batch
// it accepts can be stamped and still passes its frame and CRC check.
func FuzzValidateBatch(f *testing.F) {
	f.Add(testBatch{records: 3, valueSize: 10}.bytes())
	f.Add(testBatch{records: 1, pid: 5, seq: 0}.bytes())
	f.Add(append(testBatch{}.bytes(), testBatch{records: 2}.bytes()...))
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := DefaultConfig()
		for p := 0; p < len(b); {
			h, err := validateBatch(b[p:], cfg.MaxMessageBytes, cfg.Compact)
			if err != nil {
				return
			}
			_ = checkTimestamps(&h, 1_700_000_000_000, &cfg)
			stampBatch(b[p:], 42, 3, LogAppendTime, 99)
			if _, err := checkFrame(b[p:]); err != nil {
				t.Fatalf("stamped batch fails its check: %v", err)
			}
			n := 0
			_ = walkRecords(b[p:p+int(h.size())], -1, nil, func(o, ts int64) bool { n++; return n < 1000 })
			p += int(h.size())
		}
	})
}

// FuzzRecoverSegment: opening a directory holding arbitrary .log, .index
// and .timeindex bytes never panics, and what it serves is well formed.
func FuzzRecoverSegment(f *testing.F) {
	var seg []byte
	for i := 0; i < 6; i++ {
		b := testBatch{records: 2, valueSize: 30, ts: int64(1000 + i)}.bytes()
		stampBatch(b, int64(2*i), 0, CreateTime, 0)
		seg = append(seg, b...)
	}
	idx := binary.BigEndian.AppendUint32(nil, 5)
	idx = binary.BigEndian.AppendUint32(idx, uint32(len(seg)/2))
	f.Add(seg, idx, []byte{}, false)
	f.Add(seg[:len(seg)-7], []byte{}, make([]byte, 12), true)
	f.Add(seg, bytes.Repeat([]byte{0xff}, 16), bytes.Repeat([]byte{0x7f}, 24), true)
	f.Fuzz(func(t *testing.T, logb, idxb, tidxb []byte, clean bool) {
		m := vfs.NewCrashableMem()
		dir := "p"
		m.MkdirAll(dir, 0o755)
		write := func(name string, b []byte) {
			fl, err := m.OpenFile(dir+"/"+name, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			fl.Write(b)
			fl.Close()
		}
		write("00000000000000000000.log", logb)
		write("00000000000000000000.index", idxb)
		write("00000000000000000000.timeindex", tidxb)
		if clean {
			write(checkpointName, []byte("0\n0\n0\n1\n"))
		}
		cfg := DefaultConfig()
		cfg.IndexIntervalBytes = 64
		l, err := Open(Options{FS: m, Dir: dir, Config: cfg, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return
		}
		defer l.Close()
		for off, n := l.LogStartOffset(), 0; off < l.LogEndOffset() && n < 1000; n++ {
			fs, err := l.Read(off, 1<<62, 1<<16, true)
			if err != nil || fs.Len == 0 {
				break
			}
			if !clean {
				// Recovered data is CRC-checked: the slice must be well formed.
				b := make([]byte, fs.Len)
				fs.File.ReadAt(b, fs.Pos)
				for len(b) > 0 {
					h, err := checkFrame(b)
					if err != nil {
						t.Fatalf("served a bad batch at %d: %v", off, err)
					}
					b = b[h.size():]
				}
			}
			if fs.LastOffset < off {
				break
			}
			off = fs.LastOffset + 1
		}
		l.OffsetForTimestamp(1003)
		l.MaxTimestamp()
		l.Append(testBatch{records: 1}.bytes(), 0)
	})
}
