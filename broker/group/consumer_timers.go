package group

// Session and rebalance timeouts of consumer group members. The group
// keeps one timer at its earliest member deadline; when it fires, Fire
// asks the coordinator to take the partition's lock and call ExpireNow.
// Without a Fire hook (pure tests) there are no timers: tests call Expire
// with the time they choose.

import "time"

// ConsumerGroupEnv connects a group to the running coordinator.
type ConsumerGroupEnv struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Topics returns the current topic metadata.
	Topics func() TopicLookup
	// Fire is called from a timer goroutine once a member deadline may
	// have passed. It must serialize with the group's other calls (the
	// partition lock), call ExpireNow and persist the returned records.
	Fire func(groupID string)
}

// NewConsumerGroupWithEnv returns an empty group wired to a coordinator.
func NewConsumerGroupWithEnv(id string, cfg ConsumerGroupConfig, env ConsumerGroupEnv) *ConsumerGroup {
	if env.Now == nil {
		env.Now = time.Now
	}
	g := NewConsumerGroup(id, cfg, env.Now())
	g.env = env
	return g
}

func (g *ConsumerGroup) topics() TopicLookup {
	if g.env.Topics == nil {
		return nil
	}
	return g.env.Topics()
}

// ExpireNow fences the members whose deadlines passed by the env's clock.
func (g *ConsumerGroup) ExpireNow() []Record {
	now := time.Now
	if g.env.Now != nil {
		now = g.env.Now
	}
	recs, _ := g.Expire(now(), g.topics())
	return recs
}

// rearm points the timer at the earliest deadline.
func (g *ConsumerGroup) rearm() {
	if g.env.Fire == nil {
		return
	}
	next := g.NextDeadline()
	if g.timer != nil && next.Equal(g.armed) {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.armed = next
	if next.IsZero() || g.deleted {
		return
	}
	d := next.Sub(g.env.Now())
	if d < 0 {
		d = 0
	}
	id, fire := g.id, g.env.Fire
	g.timer = time.AfterFunc(d, func() { fire(id) })
}

// Close stops the group's timer (partition unloaded, group deleted).
func (g *ConsumerGroup) Close() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.armed = time.Time{}
	g.env.Fire = nil
}
