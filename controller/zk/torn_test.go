package zk

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
	"strata/internal/testenv"
)

// The active controller must tell the brokers what ZooKeeper held at one
// moment: a partition's replicas (the topic znode) and its leader and ISR
// (the state znode) as they stood together at the zxid the controller's
// view was read at, never the replicas of one moment with the state of
// another.
//
// The test races reassignments (each step writes the topic znode and the
// partition states in one multi-op), ISR expansions by the leaders,
// preferred leader elections and broker restarts (controller failovers
// among them), records every partition of every LeaderAndIsr and
// UpdateMetadata the controllers send with the zxid of the view it was
// built from, and then replays ZooKeeper's transaction log to check each
// against the topic and state znodes as they were at that zxid.
func TestNoTornView(t *testing.T) {
	var sent sentStates
	sendHook = sent.record
	t.Cleanup(func() { sendHook = nil })

	z := testenv.StartZooKeeper(t)
	const n = 4
	ids := []int32{1, 2, 3, 4}
	var mu sync.Mutex
	cs := map[int32]*Controller{}
	for _, id := range ids {
		cs[id] = newController(t, z, id)
	}
	list := func() []*Controller {
		mu.Lock()
		defer mu.Unlock()
		var out []*Controller
		for _, id := range ids {
			out = append(out, cs[id])
		}
		return out
	}
	active := func() *Controller {
		for _, c := range list() {
			if c.IsActive() {
				return c
			}
		}
		return nil
	}
	act := activeOf(t, list()...)
	waitUntil(t, 10*time.Second, "every broker registered", func() bool { return len(act.Metadata().Brokers) == n })

	const topic, parts = "race", 8
	ctx := context.Background()
	var assign [][]int32
	for p := range parts {
		assign = append(assign, []int32{ids[p%n], ids[(p+1)%n]})
	}
	if _, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: topic, Assignments: assign}); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithTimeout(ctx, 8*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var reassigned, expanded, elected, restarted counter
	loop := func(pause time.Duration, f func(r *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
			for runCtx.Err() == nil {
				f(r)
				select {
				case <-runCtx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
	opCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(runCtx, 2*time.Second) }

	// Reassignments to random replica sets of two or three brokers.
	loop(15*time.Millisecond, func(r *rand.Rand) {
		c := active()
		if c == nil {
			return
		}
		target := slices.Clone(ids)
		r.Shuffle(len(target), func(i, j int) { target[i], target[j] = target[j], target[i] })
		target = target[:2+r.IntN(2)]
		tp := controller.TopicPartition{Topic: topic, Partition: int32(r.IntN(parts))}
		octx, cancel := opCtx()
		defer cancel()
		if res, err := c.AlterPartitionReassignments(octx, map[controller.TopicPartition][]int32{tp: target}); err == nil && res[tp] == nil {
			reassigned.add()
		}
	})
	// Leaders take the replicas they lack into the ISR, as followers that
	// caught up; this completes reassignments.
	loop(5*time.Millisecond, func(r *rand.Rand) {
		for _, c := range list() {
			md := c.Metadata()
			tp := md.Topics[topic]
			if tp == nil {
				continue
			}
			live := liveBrokers(md)
			for _, p := range tp.Partitions {
				if p.Leader != c.opts.Broker.ID {
					continue
				}
				isr := slices.Clone(p.ISR)
				for _, id := range p.Replicas {
					if live[id] && !slices.Contains(isr, id) {
						isr = append(isr, id)
					}
				}
				if len(isr) == len(p.ISR) {
					continue
				}
				octx, cancel := opCtx()
				_, err := c.AlterPartition(octx, controller.AlterPartitionRequest{Topic: topic, Partition: p.Index,
					Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr})
				cancel()
				if err == nil {
					expanded.add()
				}
			}
		}
	})
	// Preferred leader elections.
	loop(40*time.Millisecond, func(r *rand.Rand) {
		c := active()
		if c == nil {
			return
		}
		octx, cancel := opCtx()
		defer cancel()
		res, err := c.ElectLeaders(octx, controller.ElectPreferred, nil)
		if err == nil {
			for _, e := range res {
				if e == nil {
					elected.add()
				}
			}
		}
	})
	// Broker restarts, the active controller's among them.
	loop(400*time.Millisecond, func(r *rand.Rand) {
		id := ids[r.IntN(n)]
		mu.Lock()
		old := cs[id]
		mu.Unlock()
		old.Close()
		c, err := startController(t, z, id)
		if err != nil {
			t.Errorf("restart broker %d: %v", id, err)
			stop()
			return
		}
		mu.Lock()
		cs[id] = c
		mu.Unlock()
		restarted.add()
	})
	wg.Wait()
	for _, c := range list() {
		c.Close() // no request is sent after the transaction log is read
	}
	t.Logf("%d reassignments, %d ISR expansions, %d leader elections, %d restarts; %d partition states sent in %d requests",
		reassigned.get(), expanded.get(), elected.get(), restarted.get(), len(sent.states), sent.requests)
	if reassigned.get() == 0 || expanded.get() == 0 || elected.get() == 0 || restarted.get() == 0 {
		t.Errorf("the race did not exercise every operation")
	}

	h := readTxnLog(t, zkDataDir(t, z))
	torn := 0
	for _, s := range sent.states {
		if s.zxid <= 0 {
			t.Fatalf("%s from broker %d to %d: no zxid", s.kind, s.from, s.to)
		}
		if msg := h.check(s); msg != "" {
			torn++
			if torn <= 10 {
				t.Errorf("torn view: %s", msg)
			}
			if torn == 1 {
				// The first one's znodes around its zxid.
				for _, p := range []string{testChroot + topicPath(s.topic), testChroot + statePath(s.topic, s.part)} {
					for _, v := range h[p] {
						if v.zxid > s.zxid-16 && v.zxid < s.zxid+4 {
							t.Logf("%s v%d at zxid %#x: %s", p, v.version, v.zxid, v.data)
						}
					}
				}
			}
		}
	}
	if torn > 0 {
		t.Errorf("%d of %d partition states sent were no state ZooKeeper held at the zxid they were built from", torn, len(sent.states))
	}
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// sentState is one partition of a LeaderAndIsr or UpdateMetadata sent.
type sentState struct {
	kind                           string
	from, to                       int32
	zxid                           int64
	topic                          string
	part                           int32
	leader, leaderEpoch, zkVersion int32
	isr, replicas                  []int32
}

type sentStates struct {
	mu       sync.Mutex
	states   []sentState
	requests int
}

func (l *sentStates) record(from, to int32, zxid int64, req kmsg.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	add := func(kind, topic string, part, leader, leaderEpoch, zkVersion int32, isr, replicas []int32) {
		l.states = append(l.states, sentState{kind, from, to, zxid, topic, part, leader, leaderEpoch, zkVersion,
			slices.Clone(isr), slices.Clone(replicas)})
	}
	switch r := req.(type) {
	case *kmsg.LeaderAndISRRequest:
		for _, ts := range r.TopicStates {
			for _, ps := range ts.PartitionStates {
				add("LeaderAndIsr", ts.Topic, ps.Partition, ps.Leader, ps.LeaderEpoch, ps.ZKVersion, ps.ISR, ps.Replicas)
			}
		}
	case *kmsg.UpdateMetadataRequest:
		for _, ts := range r.TopicStates {
			for _, ps := range ts.PartitionStates {
				if ps.Leader == leaderDuringDelete {
					continue // a deleted topic's: not read from ZooKeeper
				}
				add("UpdateMetadata", ts.Topic, ps.Partition, ps.Leader, ps.LeaderEpoch, ps.ZKVersion, ps.ISR, ps.Replicas)
			}
		}
	}
}

// zkDataDir finds the transaction log directory of the test's ZooKeeper:
// the dataDir of the zoo.cfg its start line names.
func zkDataDir(t *testing.T, z *testenv.ZooKeeper) string {
	t.Helper()
	for _, line := range strings.Split(z.Logs(), "\n") {
		if !strings.HasPrefix(line, "=== testenv: start") {
			continue
		}
		fields := strings.Fields(line)
		cfg := fields[len(fields)-1]
		f, err := os.Open(cfg)
		if err != nil {
			t.Fatalf("zookeeper config: %v", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if dir, ok := strings.CutPrefix(sc.Text(), "dataDir="); ok {
				return filepath.Join(dir, "version-2")
			}
		}
		t.Fatalf("no dataDir in %s", cfg)
	}
	t.Fatalf("no start line in the zookeeper log")
	return ""
}

// znodeVersion is a znode as one transaction left it.
type znodeVersion struct {
	zxid    int64
	version int32
	data    []byte
	deleted bool
}

// zkHistory is every version of every znode, by path (with the chroot),
// in zxid order, read from ZooKeeper's transaction log.
type zkHistory map[string][]znodeVersion

// at returns the znode as it was at zxid; false when it did not exist.
func (h zkHistory) at(path string, zxid int64) (znodeVersion, bool) {
	vs := h[path]
	i, _ := slices.BinarySearchFunc(vs, zxid+1, func(v znodeVersion, z int64) int {
		switch {
		case v.zxid < z:
			return -1
		case v.zxid > z:
			return 1
		}
		return 0
	})
	if i == 0 || vs[i-1].deleted {
		return znodeVersion{}, false
	}
	return vs[i-1], true
}

// check compares a sent partition state with the topic and state znodes
// at the zxid it was built from; "" when they agree.
func (h zkHistory) check(s sentState) string {
	where := fmt.Sprintf("%s from broker %d to %d for %s-%d built at zxid %#x", s.kind, s.from, s.to, s.topic, s.part, s.zxid)
	tz, ok := h.at(testChroot+topicPath(s.topic), s.zxid)
	if !ok {
		return where + ": no topic znode then"
	}
	sz, ok := h.at(testChroot+statePath(s.topic, s.part), s.zxid)
	if !ok {
		return where + ": no state znode then"
	}
	_, assign, err := decodeTopic(tz.data)
	if err != nil || int(s.part) >= len(assign) {
		return fmt.Sprintf("%s: topic znode then: %q (%v)", where, tz.data, err)
	}
	st, err := decodeState(sz.data)
	if err != nil {
		return fmt.Sprintf("%s: state znode then: %q (%v)", where, sz.data, err)
	}
	if slices.Equal(s.replicas, assign[s.part]) && s.leader == st.Leader && s.leaderEpoch == st.LeaderEpoch &&
		slices.Equal(s.isr, st.ISR) && s.zkVersion == sz.version {
		return ""
	}
	return fmt.Sprintf("%s: sent replicas %v leader %d epoch %d isr %v version %d; ZooKeeper held replicas %v (topic znode v%d of zxid %#x), leader %d epoch %d isr %v (state v%d of zxid %#x)",
		where, s.replicas, s.leader, s.leaderEpoch, s.isr, s.zkVersion,
		assign[s.part], tz.version, tz.zxid, st.Leader, st.LeaderEpoch, st.ISR, sz.version, sz.zxid)
}

// readTxnLog reads the creations, data changes and deletions of every
// znode from ZooKeeper's transaction logs (FileTxnLog: a header, then per
// transaction a checksum, the length-prefixed transaction and 'B'; the
// preallocated rest is zeros).
func readTxnLog(t *testing.T, dir string) zkHistory {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "log.*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no zookeeper transaction log in %s (%v)", dir, err)
	}
	start := func(f string) int64 {
		n, _ := strconv.ParseInt(strings.TrimPrefix(filepath.Ext(f), "."), 16, 64)
		return n
	}
	slices.SortFunc(files, func(a, b string) int { return int(start(a) - start(b)) })
	h := zkHistory{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := &jute{b: b}
		if magic := r.int32(); magic != 0x5a4b4c47 { // "ZKLG"
			t.Fatalf("%s: not a transaction log (magic %#x)", f, magic)
		}
		r.int32() // version
		r.int64() // dbid
		for r.left() >= 12 {
			r.int64() // checksum
			size := r.int32()
			if size <= 0 || r.left() < int(size)+1 {
				break
			}
			txn := &jute{b: r.take(int(size))}
			r.take(1)   // 'B'
			txn.int64() // client id
			txn.int32() // cxid
			zxid := txn.int64()
			txn.int64() // time
			h.apply(zxid, txn.int32(), txn)
		}
	}
	// The log reads right only if every change of a znode's data follows
	// on from the version before (an ephemeral's deletion at the end of
	// its session is not logged as such; it may be created again).
	for path, vs := range h {
		for i := 1; i < len(vs); i++ {
			if vs[i].version > 0 && (vs[i-1].deleted || vs[i].version != vs[i-1].version+1) {
				t.Fatalf("transaction log misread: %s v%d at zxid %#x follows v%d at %#x", path, vs[i].version, vs[i].zxid, vs[i-1].version, vs[i-1].zxid)
			}
		}
	}
	return h
}

// apply records one transaction (ZooKeeper's OpCode and its *Txn record).
func (h zkHistory) apply(zxid int64, op int32, r *jute) {
	switch op {
	case 1, 15, 19, 21: // create, create2, createContainer, createTTL
		path := r.str()
		h[path] = append(h[path], znodeVersion{zxid: zxid, version: 0, data: r.buf()})
	case 5: // setData
		path := r.str()
		data := r.buf()
		h[path] = append(h[path], znodeVersion{zxid: zxid, version: r.int32(), data: data})
	case 2, 20: // delete, deleteContainer
		path := r.str()
		h[path] = append(h[path], znodeVersion{zxid: zxid, deleted: true})
	case 14: // multi
		type sub struct {
			op int32
			r  *jute
		}
		var subs []sub
		for range r.int32() {
			op := r.int32()
			subs = append(subs, sub{op, &jute{b: r.buf()}})
		}
		// A failed multi is logged with the operations before the one
		// that failed, and an error in its place; none is applied.
		if slices.ContainsFunc(subs, func(s sub) bool { return s.op == -1 }) {
			return
		}
		for _, s := range subs {
			h.apply(zxid, s.op, s.r)
		}
	}
}

// jute reads ZooKeeper's big-endian serialization.
type jute struct{ b []byte }

func (j *jute) left() int { return len(j.b) }
func (j *jute) take(n int) []byte {
	out := j.b[:n]
	j.b = j.b[n:]
	return out
}
func (j *jute) int32() int32 { return int32(binary.BigEndian.Uint32(j.take(4))) }
func (j *jute) int64() int64 { return int64(binary.BigEndian.Uint64(j.take(8))) }
func (j *jute) buf() []byte {
	n := j.int32()
	if n < 0 {
		return nil
	}
	return slices.Clone(j.take(int(n)))
}
func (j *jute) str() string { return string(j.buf()) }
