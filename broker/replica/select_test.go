package replica

import (
	"testing"
	"time"
)

func TestSelectRackAware(t *testing.T) {
	rack := func(s string) *string { return &s }
	leader := replicaView{id: 0, rack: rack("a"), logEnd: 100}
	views := []replicaView{leader,
		{id: 1, rack: rack("b"), logEnd: 90, sinceCaughtUp: time.Second},
		{id: 2, rack: rack("b"), logEnd: 100, sinceCaughtUp: 2 * time.Second},
		{id: 3, rack: rack("b"), logEnd: 100, sinceCaughtUp: time.Second},
		{id: 4, rack: rack("c"), logEnd: 100},
		{id: 5, rack: nil, logEnd: 100},
		{id: 6, rack: rack("d"), logEnd: 80},
		{id: 7, rack: rack("d"), logEnd: 80},
	}
	for _, c := range []struct {
		rack string
		want int32
	}{
		{"", 0},  // no client rack: the leader
		{"a", 0}, // the leader's rack
		{"b", 3}, // highest log end, then most recently caught up
		{"c", 4},
		{"d", 7}, // a tie: the highest id, as Kafka's comparator
		{"x", 0}, // no replica there
	} {
		if got := selectRackAware(c.rack, leader, views); got.id != c.want {
			t.Errorf("client rack %q: replica %d, want %d", c.rack, got.id, c.want)
		}
	}
}
