package broker

import (
	"time"
)

// leaderCheckInterval is how often checkLeaders runs.
const leaderCheckInterval = time.Second

// leaderCheck is checkLeaders' memory between runs.
type leaderCheck struct {
	// staleVersion is the metadata version at which a partition's
	// applied role last differed from the metadata; 0 when none did.
	staleVersion int64
	// behind: leaders whose high watermark was behind their log end at
	// the last run, with that high watermark.
	behind map[*partition]int64
}

// checkLeaders is a safety net under reconcile, run every second by
// housekeeping with the partition set locked, so that no role change
// runs meanwhile:
//   - a partition whose applied role (leader or not, leader epoch)
//     still differs from the metadata a second later, at the same
//     metadata version, missed a reconcile: the metadata is applied
//     again, and that is said at WARN;
//   - a leader of a tiered partition with an empty log that neither
//     restores nor has restored at its leader epoch would serve an empty
//     log over the bucket's history: it restores
//     (remotelog.Manager.CheckRestore);
//   - a leader whose high watermark is behind what its ISR allows (an
//     ISR of itself alone, say) has it advanced, as Kafka's makeLeader
//     and ISR changes do, and that is said at WARN.
//
// None of these is expected to fire; each says so when it does.
func (s *Server) checkLeaders() {
	md := s.ctrl.Metadata()
	stale := false
	behind := map[*partition]int64{}
	defer func() { s.leaderCheck.behind = behind }()
	ps := s.replicas.Edit()
	for _, p := range ps.All() {
		t := md.Topics[p.Topic()]
		if t == nil || t.ID != p.TopicID() || int(p.Index()) >= len(t.Partitions) {
			continue // going away: reconcile deletes it
		}
		pm := t.Partitions[p.Index()]
		epoch, _, leading := p.LeaderTerm()
		if (pm.Leader == s.cfg.ID) != leading || leading && epoch != pm.LeaderEpoch {
			stale = true
			continue
		}
		if !leading {
			continue
		}
		s.rlm().CheckRestore(tierPart{p})
		hw, leo := p.HW(), p.Log().LogEndOffset()
		if hw >= leo || p.Restoring.Load() {
			continue
		}
		// Behind since the last run (a produce's own advance is not
		// waited for): advance it as far as the ISR allows.
		if was, ok := s.leaderCheck.behind[p]; ok && was == hw {
			p.AdvanceHW(leo)
			if now := p.HW(); now > hw {
				s.log.Warn("leader's high watermark was behind what its ISR allows; advanced",
					"topic", p.Topic(), "partition", p.Index(), "from", hw, "to", now, "leader_epoch", epoch, "isr", pm.ISR)
			}
		}
		behind[p] = p.HW()
	}
	ps.Done()
	switch {
	case !stale:
		s.leaderCheck.staleVersion = 0
	case s.leaderCheck.staleVersion != md.Version:
		s.leaderCheck.staleVersion = md.Version // give the change a second to be applied
	default:
		s.log.Warn("metadata not applied to every partition's role a second after it changed; applying it", "metadata_version", md.Version)
		s.leaderCheck.staleVersion = 0
		s.applyNow()
	}
}
