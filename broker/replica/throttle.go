package replica

// Replication throttles, as Kafka's ReplicationQuotaManager applies them
// while partitions move (kafka-reassign-partitions --throttle sets them):
//
//   - leader.replication.throttled.rate / follower.replication.throttled.rate
//     (dynamic broker configs, bytes per second; Long.MaxValue: none) bound
//     the bytes this broker sends to, or fetches as, replicas that are not
//     in the ISR, for the throttled partitions only.
//   - leader.replication.throttled.replicas /
//     follower.replication.throttled.replicas (topic configs) name the
//     throttled partitions as partition:broker pairs, of which a broker
//     takes those naming itself, or "*" for every partition.
//
// While the rate measured over the last second exceeds the bound, a
// leader answers a throttled partition's fetch from an out-of-sync
// replica with no records (the replica's fetch waits as for an idle
// partition), and a follower leaves its throttled out-of-sync partitions
// out of its fetches. In-sync replicas are never throttled, so acks=-1
// produce latency does not change. Kafka measures the rate over windows;
// here a token bucket holding one second of the rate does the same.

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"strata/controller"
)

const (
	leaderThrottledRate       = "leader.replication.throttled.rate"
	followerThrottledRate     = "follower.replication.throttled.rate"
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
)

// replThrottle is one direction's bucket.
type replThrottle struct {
	mu     sync.Mutex
	tokens float64 // bytes that may go now; negative: over the rate
	last   time.Time
	rate   int64
}

// refill brings the bucket to now at rate. Called with mu held.
func (q *replThrottle) refill(rate int64, now time.Time) {
	if rate != q.rate {
		q.rate, q.tokens = rate, float64(rate) // a new bound starts afresh
	}
	if !q.last.IsZero() {
		q.tokens = math.Min(float64(rate), q.tokens+now.Sub(q.last).Seconds()*float64(rate))
	}
	q.last = now
}

// exceeded tells whether the rate is over its bound.
func (q *replThrottle) exceeded(rate int64, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refill(rate, now)
	return q.tokens < 0
}

// available is how many bytes may go now without exceeding the rate.
func (q *replThrottle) available(rate int64, now time.Time) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refill(rate, now)
	return max(int64(q.tokens), 0)
}

// record counts n bytes that went.
func (q *replThrottle) record(rate int64, n int64, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refill(rate, now)
	q.tokens -= float64(n)
}

// throttledRate is a throttle rate config of this broker, or 0 when there
// is no bound.
func (m *Manager) throttledRate(md *controller.Metadata, key string) int64 {
	r := m.cfg.Resolver(md.BrokerConfigs).Int(key)
	if r <= 0 || r == math.MaxInt64 {
		return 0
	}
	return r
}

// throttledPartition tells whether a topic config of throttled replicas
// names partition part on this broker.
func (m *Manager) throttledPartition(t *controller.Topic, key string, part int32) bool {
	v := strings.TrimSpace(t.Configs[key])
	if v == "" {
		return false
	}
	if v == "*" {
		return true
	}
	want := strconv.Itoa(int(part)) + ":" + strconv.Itoa(int(m.cfg.ID))
	return slices.ContainsFunc(strings.Split(v, ","), func(e string) bool { return strings.TrimSpace(e) == want })
}

// LeaderThrottle is the leader-side throttle of one replica fetch; nil
// when none applies.
type LeaderThrottle struct {
	m       *Manager
	md      *controller.Metadata
	replica int32
	rate    int64
}

// LeaderThrottleFor returns the throttle of a fetch from replica, or nil.
func (m *Manager) LeaderThrottleFor(md *controller.Metadata, replica int32) *LeaderThrottle {
	rate := m.throttledRate(md, leaderThrottledRate)
	if rate == 0 {
		return nil
	}
	return &LeaderThrottle{m: m, md: md, replica: replica, rate: rate}
}

// Applies tells whether the fetch of partition part of t is throttled:
// the partition is named, and the replica is not in its ISR.
func (lt *LeaderThrottle) Applies(t *controller.Topic, part int32) bool {
	if lt == nil || !lt.m.throttledPartition(t, leaderThrottledReplicas, part) {
		return false
	}
	return !slices.Contains(t.Partitions[part].ISR, lt.replica)
}

// Hold tells whether a throttled partition gets no records now.
func (lt *LeaderThrottle) Hold() bool {
	return lt.m.leaderThrottle.exceeded(lt.rate, time.Now())
}

// Limit bounds the bytes of a throttled partition's answer to what the
// rate allows now (at least one batch goes: the read returns whole
// batches).
func (lt *LeaderThrottle) Limit(n int) int {
	return int(min(int64(n), max(lt.m.leaderThrottle.available(lt.rate, time.Now()), 1)))
}

// Sent counts bytes of throttled partitions sent.
func (lt *LeaderThrottle) Sent(n int64) {
	lt.m.leaderThrottle.record(lt.rate, n, time.Now())
}

// followerThrottled returns the follower-side rate and a test of whether
// a followed partition is throttled now (named, this broker out of its
// ISR); rate 0: no throttle.
func (m *Manager) followerThrottled(md *controller.Metadata) (int64, func(topic string, part int32) bool) {
	rate := m.throttledRate(md, followerThrottledRate)
	if rate == 0 {
		return 0, nil
	}
	return rate, func(topic string, part int32) bool {
		t := md.Topics[topic]
		if t == nil || part < 0 || int(part) >= len(t.Partitions) || !m.throttledPartition(t, followerThrottledReplicas, part) {
			return false
		}
		return !slices.Contains(t.Partitions[part].ISR, m.cfg.ID)
	}
}
