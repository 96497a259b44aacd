package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupBalancersMembersComeAndGo runs a group with each classic
// balancer while records flow: two members start, a third joins, one
// leaves cleanly and one is killed. Every record must be processed, and
// only records the killed member processed without a confirmed commit
// may be processed twice.
func TestGroupBalancersMembersComeAndGo(t *testing.T) {
	b := startGroupBroker(t)
	addr := b.Addr()
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
		{"sticky", kgo.StickyBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "balance-"+tc.name, "group-"+tc.name
			createTopic(t, addr, topic, 6, nil)
			const n = 3000
			led := newProcessLedger()
			prod := produceValues(t, addr, topic, 0, n)
			start := func(name string) *groupMember {
				return startMember(t, addr, name, group, topic, led, kgo.Balancers(tc.balancer))
			}
			m1, m2 := start("m1"), start("m2")
			waitFor(t, 30*time.Second, "first records", func() bool { return led.count() >= 300 })
			m3 := start("m3")
			waitFor(t, 30*time.Second, "records after a join", func() bool { return led.count() >= 900 })
			m1.leave()
			waitFor(t, 30*time.Second, "records after a leave", func() bool { return led.count() >= 1500 })
			m2.kill()
			if err := <-prod; err != nil {
				t.Fatal(err)
			}
			waitFor(t, 60*time.Second, fmt.Sprintf("all %d records", n), func() bool { return led.count() >= n })
			led.check(t, n, map[string]bool{"m2": true})
			m3.leave()
		})
	}
}
