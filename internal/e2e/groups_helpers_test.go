package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// groupBrokerSets keep group tests fast: few offsets partitions, a short
// initial rebalance delay, short session timeouts allowed.
var groupBrokerSets = []string{
	"offsets.topic.num.partitions=3",
	"group.initial.rebalance.delay.ms=200",
	"group.min.session.timeout.ms=500",
}

func startGroupBroker(t *testing.T) *testenv.Broker {
	return testenv.StartBroker(t, testenv.BrokerOptions{Sets: groupBrokerSets})
}

// processLedger records which member processed which record and which of
// those processings were covered by a successful commit.
type processLedger struct {
	mu        sync.Mutex
	processed map[string][]string // record value -> members that processed it
	exposed   map[string]bool     // "member/value": processed, commit not confirmed
}

func newProcessLedger() *processLedger {
	return &processLedger{processed: map[string][]string{}, exposed: map[string]bool{}}
}

func (l *processLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.processed)
}

// check: every value 0..n-1 processed, and a value processed twice only
// if an earlier processing was by a member that crashed before its
// commit was confirmed.
func (l *processLedger) check(t *testing.T, n int, crashed map[string]bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range n {
		v := strconv.Itoa(i)
		by := l.processed[v]
		if len(by) == 0 {
			t.Errorf("record %s never processed", v)
			continue
		}
		for _, m := range by[:len(by)-1] {
			if !crashed[m] || !l.exposed[m+"/"+v] {
				t.Errorf("record %s processed by %v: duplicate not explained by a crash", v, by)
				break
			}
		}
	}
}

// groupMember is a franz-go consumer that processes then commits, and
// can be killed abruptly (its connections cut, no LeaveGroup).
type groupMember struct {
	name   string
	cl     *kgo.Client
	dead   atomic.Bool
	conns  sync.Map // net.Conn -> struct{}
	done   chan struct{}
	cancel context.CancelFunc
}

func startMember(t *testing.T, addr, name, group, topic string, led *processLedger, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, done: make(chan struct{})}
	d := &net.Dialer{Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		if m.dead.Load() {
			return nil, errors.New("member is dead")
		}
		c, err := d.DialContext(ctx, network, host)
		if err == nil {
			m.conns.Store(c, struct{}{})
		}
		return c, err
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.Dialer(dial), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(1500 * time.Millisecond), kgo.HeartbeatInterval(150 * time.Millisecond),
		kgo.RebalanceTimeout(5 * time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.loop(ctx, led)
	t.Cleanup(func() { m.stop(); cl.Close() })
	return m
}

func (m *groupMember) loop(ctx context.Context, led *processLedger) {
	defer close(m.done)
	defer m.cl.AllowRebalance() // a poll may have returned records we drop
	for ctx.Err() == nil && !m.dead.Load() {
		fs := m.cl.PollRecords(ctx, 200)
		recs := fs.Records()
		var vals []string
		led.mu.Lock()
		if m.dead.Load() {
			led.mu.Unlock()
			return
		}
		for _, r := range recs {
			v := string(r.Value)
			vals = append(vals, v)
			led.processed[v] = append(led.processed[v], m.name)
			led.exposed[m.name+"/"+v] = true
		}
		led.mu.Unlock()
		if len(recs) > 0 {
			// Not derived from ctx: a member that stops (leave) finishes
			// the commit of what it processed, as a well-behaved consumer
			// does; only kill() loses it (its connections are cut).
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := m.cl.CommitRecords(cctx, recs...)
			ccancel()
			if err == nil {
				led.mu.Lock()
				for _, v := range vals {
					delete(led.exposed, m.name+"/"+v)
				}
				led.mu.Unlock()
			}
		}
		m.cl.AllowRebalance()
	}
}

// uncommitted counts the records member name processed whose commit has
// not been confirmed yet.
func (l *processLedger) uncommitted(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k := range l.exposed {
		if len(k) > len(name) && k[:len(name)+1] == name+"/" {
			n++
		}
	}
	return n
}

// stop ends the poll loop (the client stays in the group until closed).
func (m *groupMember) stop() {
	m.cancel()
	<-m.done
}

// leave stops processing and leaves the group cleanly.
func (m *groupMember) leave() {
	m.stop()
	m.cl.Close()
}

// kill crashes the member: no more processing, its connections are cut
// and it can open no new ones, so the coordinator only notices through
// its session timeout.
func (m *groupMember) kill() {
	m.dead.Store(true)
	m.conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	m.cancel()
	<-m.done
}

// produceValues produces "from".."n-1" in small steps so that records
// flow while members come and go.
func produceValues(t *testing.T, addr, topic string, from, n int) <-chan error {
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for i := from; i < n; i += 50 {
			for j := i; j < min(i+50, n); j++ {
				cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(j))}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				errc <- fmt.Errorf("produce: %w", err)
				return
			}
			time.Sleep(20 * time.Millisecond) // pacing, not synchronisation
		}
		errc <- nil
	}()
	return errc
}
