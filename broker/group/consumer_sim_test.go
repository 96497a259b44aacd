package group

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simClient is a well-behaved KIP-848 client: it consumes exactly what the
// last response assigned it, and reports that as owned.
type simClient struct {
	id     string
	inst   *string
	epoch  int32
	owned  TopicPartitions
	joined bool
}

// TestConsumerSimulation drives random joins, heartbeats, leaves, static
// restarts, expirations and topic growth, and checks after every step that
// no two clients consume the same partition; then lets everyone heartbeat
// until the group is stable with every partition consumed.
func TestConsumerSimulation(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed) })
	}
}

func simulate(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	parts := map[string]int32{"a": int32(1 + rng.Intn(8)), "b": int32(rng.Intn(5))}
	h := newHarness(t, ConsumerGroupConfig{}, parts)
	assignor := []string{"uniform", "range"}[rng.Intn(2)]
	var clients []*simClient
	for i := 0; i < 5; i++ {
		c := &simClient{id: fmt.Sprintf("c%d", i)}
		if i%2 == 0 {
			c.inst = kmsg.StringPtr(fmt.Sprintf("inst%d", i))
		}
		clients = append(clients, c)
	}
	checkClients := func() {
		t.Helper()
		seen := map[topicPartition]string{}
		for _, c := range clients {
			for id, ps := range c.owned {
				for _, p := range ps {
					k := topicPartition{id, p}
					if o, dup := seen[k]; dup {
						t.Fatalf("seed %d: partition %v/%d consumed by %s and %s", seed, id[0], p, o, c.id)
					}
					seen[k] = c.id
				}
			}
		}
	}
	reset := func(c *simClient) { c.joined, c.epoch, c.owned = false, 0, TopicPartitions{} }
	step := func(c *simClient) {
		var req *kmsg.ConsumerGroupHeartbeatRequest
		if !c.joined {
			req = joinReq(c.id, "a", "b")
			req.InstanceID = c.inst
			req.ServerAssignor = kmsg.StringPtr(assignor)
		} else {
			req = hbReq(c.id, c.epoch, c.owned.Clone())
			req.InstanceID = c.inst
		}
		resp := h.hb(req)
		switch resp.ErrorCode {
		case 0:
		case kerr.UnknownMemberID.Code, kerr.FencedMemberEpoch.Code, kerr.FencedInstanceID.Code, kerr.UnreleasedInstanceID.Code:
			reset(c)
			return
		default:
			t.Fatalf("seed %d: %s: %v", seed, c.id, kerr.ErrorForCode(resp.ErrorCode))
		}
		c.joined, c.epoch = true, resp.MemberEpoch
		if a := respTP(resp); a != nil {
			c.owned = a
		}
	}
	for i := 0; i < 300; i++ {
		c := clients[rng.Intn(len(clients))]
		switch r := rng.Intn(20); {
		case r < 14:
			step(c)
		case r == 14 && c.joined:
			req := hbReq(c.id, -1, nil)
			req.InstanceID = c.inst
			h.hb(req)
			reset(c)
		case r == 15 && c.joined && c.inst != nil:
			// Static restart: temporary leave, new member id.
			req := hbReq(c.id, -2, nil)
			req.InstanceID = c.inst
			h.hb(req)
			reset(c)
			c.id += "'"
		case r == 16:
			for _, id := range h.expire(time.Duration(rng.Intn(50)) * time.Second) {
				for _, c := range clients {
					if c.id == id {
						reset(c) // its next heartbeat would fail anyway
					}
				}
			}
		case r == 17:
			parts["b"]++
			h.topics = testTopics(parts)
		}
		checkClients()
	}
	// Everyone alive heartbeats until stable.
	for _, c := range clients {
		if !c.joined {
			step(c)
		}
	}
	for round := 0; round < 20 && h.g.StateString() != "Stable"; round++ {
		for _, c := range clients {
			step(c)
			checkClients()
		}
	}
	if s := h.g.StateString(); s != "Stable" {
		t.Fatalf("seed %d: group %s after convergence rounds", seed, s)
	}
	total := 0
	for _, c := range clients {
		total += c.owned.Len()
	}
	if want := int(parts["a"] + parts["b"]); total != want {
		t.Fatalf("seed %d: %d partitions consumed, want %d", seed, total, want)
	}

	// Everything persisted replays into the same group.
	re := NewConsumerGroup("grp", ConsumerGroupConfig{}, t0)
	for _, r := range h.recs {
		if err := re.Replay(r.Key, r.Value); err != nil {
			t.Fatalf("seed %d: replay: %v", seed, err)
		}
	}
	compareGroups(t, h.g, re)
}

func compareGroups(t *testing.T, a, b *ConsumerGroup) {
	t.Helper()
	if a.epoch != b.epoch || a.assignmentEpoch != b.assignmentEpoch || a.metadataHash != b.metadataHash {
		t.Fatalf("epochs %d/%d/%x vs %d/%d/%x", a.epoch, a.assignmentEpoch, a.metadataHash, b.epoch, b.assignmentEpoch, b.metadataHash)
	}
	if fmt.Sprint(a.MemberIDs()) != fmt.Sprint(b.MemberIDs()) {
		t.Fatalf("members %v vs %v", a.MemberIDs(), b.MemberIDs())
	}
	for _, id := range a.MemberIDs() {
		ma, mb := a.members[id], b.members[id]
		if ma.Epoch != mb.Epoch || ma.PreviousEpoch != mb.PreviousEpoch || ma.State != mb.State ||
			!ma.Assigned.Equal(mb.Assigned) || !ma.PendingRevocation.Equal(mb.PendingRevocation) ||
			fmt.Sprint(ma.SubscribedTopicNames) != fmt.Sprint(mb.SubscribedTopicNames) ||
			fmt.Sprint(ma.InstanceID) != fmt.Sprint(mb.InstanceID) && (ma.InstanceID == nil || mb.InstanceID == nil || *ma.InstanceID != *mb.InstanceID) ||
			fmt.Sprint(ma.AssignEpochs) != fmt.Sprint(mb.AssignEpochs) {
			t.Fatalf("member %s differs:\n%+v\n%+v", id, ma, mb)
		}
		if !a.target[id].Equal(b.target[id]) {
			t.Fatalf("target of %s: %v vs %v", id, a.target[id], b.target[id])
		}
	}
	if fmt.Sprint(a.static) != fmt.Sprint(b.static) {
		t.Fatalf("static %v vs %v", a.static, b.static)
	}
	if fmt.Sprint(a.owners) != fmt.Sprint(b.owners) {
		t.Fatalf("owners %v vs %v", a.owners, b.owners)
	}
}

func TestConsumerGroupTombstones(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 2})
	h.ok(joinReq("m1", "a"))
	re := NewConsumerGroup("grp", ConsumerGroupConfig{}, t0)
	for _, r := range append(h.recs, h.g.TombstoneRecords()...) {
		if err := re.Replay(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if !re.IsDead() || !re.IsEmpty() {
		t.Fatalf("after tombstones: dead %v empty %v", re.IsDead(), re.IsEmpty())
	}
	for _, r := range h.g.TombstoneRecords() {
		if !IsConsumerRecordKey(r.Key) || r.Value != nil {
			t.Fatalf("bad tombstone %x", r.Key)
		}
		if id, ok := ConsumerRecordGroupID(r.Key); !ok || id != "grp" {
			t.Fatalf("group id of %x: %q", r.Key, id)
		}
	}
}

func FuzzConsumerReplay(f *testing.F) {
	h := newHarness(&testing.T{}, ConsumerGroupConfig{}, map[string]int32{"a": 3})
	h.g.Heartbeat(HeartbeatContext{Now: t0, Topics: h.topics}, staticJoin("m1", "i1", "a"))
	_, recs := h.g.Heartbeat(HeartbeatContext{Now: t0, Topics: h.topics}, joinReq("m2", "a"))
	for _, r := range recs {
		f.Add(r.Key, r.Value)
	}
	f.Add([]byte{0, 8, 0, 3, 'g', 'r', 'p', 0, 1, 'm'}, []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		g := NewConsumerGroup("grp", ConsumerGroupConfig{}, t0)
		if err := g.Replay(key, value); err != nil {
			return
		}
		// Whatever loaded must serve heartbeats and describes.
		g.AfterLoad(t0)
		g.Describe(nil)
		g.StateString()
		for _, id := range g.MemberIDs() {
			g.Heartbeat(HeartbeatContext{Now: t0}, hbReq(id, 1, TopicPartitions{}))
		}
		g.Expire(t0.Add(time.Hour), nil)
	})
}
