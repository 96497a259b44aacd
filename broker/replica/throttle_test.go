package replica

import (
	"testing"
	"time"

	"strata/broker/config"
	"strata/controller"
)

func TestReplThrottleBucket(t *testing.T) {
	var q replThrottle
	t0 := time.Unix(1000, 0)
	if q.exceeded(1000, t0) {
		t.Fatal("a fresh throttle is exceeded")
	}
	q.record(1000, 1500, t0)
	if !q.exceeded(1000, t0) {
		t.Fatal("1500 bytes at once within a 1000 B/s bound is not over it")
	}
	if !q.exceeded(1000, t0.Add(400*time.Millisecond)) {
		t.Fatal("over the bound again after 0.4 s: 100 bytes still owed")
	}
	if q.exceeded(1000, t0.Add(600*time.Millisecond)) {
		t.Fatal("still over the bound after 0.6 s, when 100 bytes may go")
	}
	// Idle time does not bank more than one second of the rate.
	if q.exceeded(1000, t0.Add(time.Hour)) {
		t.Fatal("exceeded after an hour idle")
	}
	q.record(1000, 1001, t0.Add(time.Hour))
	if !q.exceeded(1000, t0.Add(time.Hour)) {
		t.Fatal("an hour idle banked more than one second of the rate")
	}
	// A new bound starts afresh.
	if q.exceeded(5000, t0.Add(time.Hour)) {
		t.Fatal("a raised bound still counts the old debt")
	}
}

func TestThrottledPartition(t *testing.T) {
	cfg, err := config.Load(map[string]string{"broker.id": "2"})
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{cfg: cfg}
	topic := func(v string) *controller.Topic {
		return &controller.Topic{Configs: map[string]string{leaderThrottledReplicas: v}}
	}
	for _, c := range []struct {
		list string
		part int32
		want bool
	}{
		{"", 0, false}, {"*", 7, true}, {"0:2", 0, true}, {"0:1,0:3", 0, false},
		{"1:2, 0:2", 0, true}, {"0:2", 1, false}, {"10:2", 1, false},
	} {
		if got := m.throttledPartition(topic(c.list), leaderThrottledReplicas, c.part); got != c.want {
			t.Errorf("%q partition %d on broker 2: throttled %v, want %v", c.list, c.part, got, c.want)
		}
	}
}
