package broker

import "time"

// cleanerMemory charges what the cleaner holds to read a compressed batch
// (its codec's window and buffers, a rebuilt batch's compressor and
// output) to queued.max.request.bytes, as the produce path's validation
// is, waiting while the pool is full; a batch whose charge is refused
// (more than the whole bound) is kept as it is (plog/clean_stream.go).
func (s *Server) cleanerMemory(n int64) (func(), error) {
	return s.network.ReserveMemory(n, s.ctx.Done())
}

// cleanerLoop runs log compaction (cleanup.policy=compact) on the
// partitions this broker leads every log.cleaner.backoff.ms, never past the
// high watermark nor the last stable offset (plog/clean_txn.go for the
// transaction rules). Logs without compaction return at once. Compressed
// batches are read as streams, never whole, charged to
// queued.max.request.bytes (cleanerMemory).
func (s *Server) cleanerLoop() {
	defer s.wg.Done()
	for {
		backoff := time.Duration(s.resolver(s.ctrl.Metadata()).Int("log.cleaner.backoff.ms")) * time.Millisecond
		if backoff <= 0 {
			backoff = 15 * time.Second
		}
		t := time.NewTimer(backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for _, p := range s.allPartitions() {
			if !s.isLeader(p) {
				continue
			}
			st, err := p.Log().CleanBelowCharged(p.HW(), s.cleanerMemory)
			switch {
			case err != nil:
				s.log.Warn("log cleaner", "topic", p.Topic(), "partition", p.Index(), "err", err)
			case st.Cleaned:
				s.log.Info("log cleaner", "topic", p.Topic(), "partition", p.Index(),
					"segments", st.SegmentsCleaned, "records_read", st.RecordsRead, "records_kept", st.RecordsKept,
					"batches_skipped", st.BatchesSkipped)
			}
		}
	}
}
