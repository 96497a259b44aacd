package plog

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"strata/internal/vfs"
)

// BenchmarkFetch reads a log of non-transactional batches as a consumer
// fetch does (broker/01_fetch.go): the last stable offset at the high
// watermark, then the slice, and for read_committed the aborted
// transactions of the slice. Fetchers run in parallel, as the
// connections of many consumers do; in the appending cases a producer
// appends meanwhile, holding the log's lock for its writes.
func BenchmarkFetch(b *testing.B) {
	for _, appending := range []bool{false, true} {
		for _, committed := range []bool{false, true} {
			name := "read_uncommitted"
			if committed {
				name = "read_committed"
			}
			if appending {
				name += "/appending"
			}
			b.Run(name, func(b *testing.B) { benchFetch(b, committed, appending, false) })
		}
	}
}

// BenchmarkFetchTxnState is the part of a read_committed fetch that
// transactions add, on a log of non-transactional batches: the last
// stable offset and the aborted transactions of the slice read.
func BenchmarkFetchTxnState(b *testing.B) {
	b.Run("idle", func(b *testing.B) { benchFetch(b, true, false, true) })
	b.Run("appending", func(b *testing.B) { benchFetch(b, true, true, true) })
}

// benchFetch runs fetches (only their transaction state when
// txnStateOnly) while a producer appends or not.
func benchFetch(b *testing.B, committed, appending, txnStateOnly bool) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	l, err := Open(Options{FS: vfs.OS, Dir: filepath.Join(b.TempDir(), "t-0"), Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := testBatch{records: 4, valueSize: 1024}.bytes()
	for range 4000 {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	hw := l.LogEndOffset()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if appending {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.Append(batch, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int64(0)
		for pb.Next() {
			i++
			off := (i * 4 * 7) % hw
			lso := l.LastStableOffset(hw)
			if txnStateOnly {
				if lso != hw || len(l.AbortedTransactions(off, off+16)) != 0 {
					b.Error("transaction state in a log without transactions")
					return
				}
				continue
			}
			if !committed {
				if _, err := l.ReadForFetch(off, hw, 16<<10, true); err != nil {
					b.Error(err)
					return
				}
				continue
			}
			sl, upper, err := l.ReadCommittedForFetch(off, lso, 16<<10, true)
			if err != nil {
				b.Error(err)
				return
			}
			if sl.Len > 0 {
				if ab := l.AbortedTransactions(off, upper); len(ab) != 0 {
					b.Errorf("aborted transactions %v in a log without transactions", ab)
					return
				}
			}
		}
	})
	b.StopTimer()
	close(stop)
	wg.Wait()
}
