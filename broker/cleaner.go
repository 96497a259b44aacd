package broker

import "time"

// cleanerLoop runs log compaction (cleanup.policy=compact) on the
// partitions this broker leads every log.cleaner.backoff.ms, never past the
// high watermark. Logs without compaction return at once.
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
			st, err := p.Log().CleanBelow(p.HW())
			switch {
			case err != nil:
				s.log.Warn("log cleaner", "topic", p.Topic(), "partition", p.Index(), "err", err)
			case st.Cleaned:
				s.log.Info("log cleaner", "topic", p.Topic(), "partition", p.Index(),
					"segments", st.SegmentsCleaned, "records_read", st.RecordsRead, "records_kept", st.RecordsKept)
			}
		}
	}
}
