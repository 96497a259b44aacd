package bench

import (
	"testing"
	"time"
)

func TestLongestGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond).UnixNano())
		}
		return out
	}
	to := t0.Add(10 * time.Second)
	for _, c := range []struct {
		name string
		acks []int64
		want time.Duration
	}{
		// Steady acks every 10 ms, an outage from 2 s to 7.5 s, steady again.
		{"outage", at(0, 10, 20, 2000, 7500, 7510, 9990), 5500 * time.Millisecond},
		// Acks out of callback order and before from are handled.
		{"unsorted", at(7510, -500, 2000, 7500, 20, 9995), 5500 * time.Millisecond},
		// An outage still open at to counts up to to.
		{"open", at(0, 100, 8000), 7900 * time.Millisecond},
		{"none", nil, 10 * time.Second},
		// Acks after to do not count.
		{"late", at(0, 5000, 12000), 5000 * time.Millisecond},
	} {
		if got := longestGap(c.acks, t0, to); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// ackLog.since keeps what a gap needs.
	a := newAckLog()
	for _, ms := range []int{0, 10, 2000, 7500} {
		a.add(tp{"t", 0}, t0.Add(time.Duration(ms)*time.Millisecond))
	}
	if got := longestGap(a.since(tp{"t", 0}, t0.Add(5*time.Millisecond)), t0.Add(5*time.Millisecond), to); got != 5500*time.Millisecond {
		t.Errorf("from the log: %v", got)
	}
}

func TestFailoverGoals(t *testing.T) {
	res := func(kill, shutdown float64, session int64) Result {
		return Result{Target: TargetCluster, Failover: &FailoverStats{SessionTimeoutMs: session, Faults: []Fault{
			{Kind: FaultKill, WindowMs: kill}, {Kind: FaultShutdown, WindowMs: shutdown}}}}
	}
	w := Workload{Name: "failover"}
	reps := []*Report{
		{Workload: w, Results: []Result{res(18500, 300, 18000)}},
		{Workload: w, Results: []Result{res(19400, 1200, 18000)}, Run: 2},
	}
	gs := EvaluateGoals(Issue5Goals[1:], reps)
	// The worst run decides: 19.4 s is 1.4 s past the session timeout; 1.2 s.
	if !gs[0].Evaluated || gs[0].Pass || gs[0].Measured != 1400 || !gs[1].Evaluated || gs[1].Pass || gs[1].Measured != 1200 {
		t.Fatalf("goals %+v", gs)
	}
	if gs := EvaluateGoals(Issue5Goals[1:2], []*Report{{Workload: w, Results: []Result{res(18500, 300, -1)}}}); gs[0].Evaluated {
		t.Fatalf("kill goal evaluated without a session timeout: %+v", gs[0])
	}
	if gs := EvaluateGoals(Issue5Goals[1:], reps[:1]); !gs[0].Pass || !gs[1].Pass {
		t.Fatalf("goals of the first run %+v", gs)
	}
}
