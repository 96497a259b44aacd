package group

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinMemberIDRequiredAndInitialDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, func(c *Config) { c.InitialRebalanceDelayMs = 3000 })
		a := joinNew(t, c, "g", joinOpts{rebalance: 10000})
		pending(t, a)
		time.Sleep(2 * time.Second)
		b := joinNew(t, c, "g", joinOpts{rebalance: 10000}) // extends the delay (new member added)
		time.Sleep(1500 * time.Millisecond)
		pending(t, a)
		time.Sleep(3 * time.Second)
		ra, rb := recv(t, a), recv(t, b)
		if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 1 || rb.Generation != 1 {
			t.Fatalf("codes %d %d generations %d %d", ra.ErrorCode, rb.ErrorCode, ra.Generation, rb.Generation)
		}
		if *ra.Protocol != "range" || ra.LeaderID != rb.LeaderID {
			t.Fatalf("protocol %v leaders %s %s", ra.Protocol, ra.LeaderID, rb.LeaderID)
		}
		leader, follower := ra, rb
		if rb.LeaderID == rb.MemberID {
			leader, follower = rb, ra
		}
		if len(leader.Members) != 2 || len(follower.Members) != 0 {
			t.Fatalf("leader got %d members, follower %d", len(leader.Members), len(follower.Members))
		}
	})
}

func TestJoinValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, func(c *Config) { c.GroupMaxSize = 2 })
		for _, tc := range []struct {
			name  string
			group string
			o     joinOpts
			code  int16
		}{
			{"empty group id", "", joinOpts{}, codeInvalidGroupID},
			{"session too small", "g", joinOpts{session: 5}, codeInvalidSessionTimeout},
			{"session too large", "g", joinOpts{session: 1 << 30}, codeInvalidSessionTimeout},
			{"unknown member", "g", joinOpts{member: "nobody"}, codeUnknownMemberID},
			{"no protocols", "g2", joinOpts{protocols: []string{}, version: 3}, codeInconsistentGroupProtocol},
		} {
			if r := recv(t, joinAsync(c, classicJoinReq(tc.group, tc.o))); r.ErrorCode != tc.code {
				t.Errorf("%s: code %d, want %d", tc.name, r.ErrorCode, tc.code)
			}
		}
		ids, _ := stableGroup(t, c, "g", 1)
		if r := recv(t, joinAsync(c, classicJoinReq("g", joinOpts{version: 3, protoType: "connect"}))); r.ErrorCode != codeInconsistentGroupProtocol {
			t.Errorf("other protocol type: code %d", r.ErrorCode)
		}
		if r := recv(t, joinAsync(c, classicJoinReq("g", joinOpts{version: 3, protocols: []string{"roundrobin"}}))); r.ErrorCode != codeInconsistentGroupProtocol {
			t.Errorf("no common protocol: code %d", r.ErrorCode)
		}
		joinAsync(c, classicJoinReq("full", joinOpts{version: 3}))
		joinAsync(c, classicJoinReq("full", joinOpts{version: 3}))
		synctest.Wait()
		if r := recv(t, joinAsync(c, classicJoinReq("full", joinOpts{version: 3}))); r.ErrorCode != codeGroupMaxSizeReached {
			t.Errorf("group full: code %d", r.ErrorCode)
		}
		// Malformed consumer metadata neither panics nor breaks the group.
		r := recv(t, joinAsync(c, classicJoinReq("g", joinOpts{member: ids[0], meta: []byte{0xff, 0, 1}})))
		if r.ErrorCode != 0 {
			t.Errorf("rejoin with junk metadata: code %d", r.ErrorCode)
		}
	})
}

func TestProtocolSelectionByVote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		a := joinNew(t, c, "g", joinOpts{protocols: []string{"sticky", "range"}})
		b := joinNew(t, c, "g", joinOpts{protocols: []string{"range", "sticky", "rr"}})
		d := joinNew(t, c, "g", joinOpts{protocols: []string{"sticky", "rr", "range"}})
		time.Sleep(200 * time.Millisecond)
		for _, ch := range []<-chan *kmsg.JoinGroupResponse{a, b, d} {
			if r := recv(t, ch); r.ErrorCode != 0 || *r.Protocol != "sticky" {
				t.Fatalf("code %d protocol %v", r.ErrorCode, r.Protocol)
			}
		}
	})
}

func TestSessionTimeoutRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		ids, gen := stableGroup(t, c, "g", 2)
		// Only the leader heartbeats; the follower's session (1s) lapses.
		for range 5 {
			time.Sleep(300 * time.Millisecond)
			if code := heartbeat(c, "g", ids[0], gen); code != 0 && code != codeRebalanceInProgress {
				t.Fatalf("heartbeat: %d", code)
			}
		}
		if code := heartbeat(c, "g", ids[0], gen); code != codeRebalanceInProgress {
			t.Fatalf("leader heartbeat after follower expiry: %d", code)
		}
		if code := heartbeat(c, "g", ids[1], gen); code != codeUnknownMemberID {
			t.Fatalf("expired member heartbeat: %d", code)
		}
		r := recv(t, joinAsync(c, classicJoinReq("g", joinOpts{member: ids[0]})))
		if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
			t.Fatalf("rejoin: code %d gen %d members %d", r.ErrorCode, r.Generation, len(r.Members))
		}
		if code := heartbeat(c, "g", ids[0], gen); code != codeIllegalGeneration {
			t.Fatalf("old generation heartbeat: %d", code)
		}
	})
}

func TestRebalanceTimeoutDropsSilentMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		ids, gen := stableGroup(t, c, "g", 2)
		// The leader rejoins (forcing a rebalance); the follower keeps
		// heartbeating but never rejoins.
		ch := joinAsync(c, classicJoinReq("g", joinOpts{member: ids[0]}))
		for range 8 {
			time.Sleep(300 * time.Millisecond)
			heartbeat(c, "g", ids[1], gen)
		}
		r := recv(t, ch) // rebalance timeout is 2s
		if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
			t.Fatalf("code %d gen %d members %d", r.ErrorCode, r.Generation, len(r.Members))
		}
		if code := heartbeat(c, "g", ids[1], gen); code != codeUnknownMemberID {
			t.Fatalf("dropped member: %d", code)
		}
	})
}

func TestSyncGroupRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		a := joinNew(t, c, "g", joinOpts{})
		b := joinNew(t, c, "g", joinOpts{})
		time.Sleep(200 * time.Millisecond)
		ra, rb := recv(t, a), recv(t, b)
		leader, follower := ra, rb
		if rb.LeaderID == rb.MemberID {
			leader, follower = rb, ra
		}
		// The follower waits; a commit now is REBALANCE_IN_PROGRESS.
		fs := syncAsync(c, syncReq("g", follower.MemberID, follower.Generation, nil))
		pending(t, fs)
		if code := commit(c, "g", follower.MemberID, follower.Generation, "t", 0, 1, ""); code != codeRebalanceInProgress {
			t.Fatalf("commit while CompletingRebalance: %d", code)
		}
		bad := syncReq("g", leader.MemberID, leader.Generation, nil)
		bad.Protocol = kmsg.StringPtr("roundrobin")
		if r := recv(t, syncAsync(c, bad)); r.ErrorCode != codeInconsistentGroupProtocol {
			t.Fatalf("wrong protocol name: %d", r.ErrorCode)
		}
		if r := recv(t, syncAsync(c, syncReq("g", leader.MemberID, leader.Generation+1, nil))); r.ErrorCode != codeIllegalGeneration {
			t.Fatalf("wrong generation: %d", r.ErrorCode)
		}
		// The leader leaves the follower out: it gets an empty assignment.
		ls := syncAsync(c, syncReq("g", leader.MemberID, leader.Generation, map[string][]byte{leader.MemberID: []byte("x"), "ghost": []byte("y")}))
		if r := recv(t, ls); r.ErrorCode != 0 || string(r.MemberAssignment) != "x" || *r.Protocol != "range" {
			t.Fatalf("leader sync: %d %q", r.ErrorCode, r.MemberAssignment)
		}
		if r := recv(t, fs); r.ErrorCode != 0 || len(r.MemberAssignment) != 0 {
			t.Fatalf("follower sync: %d %q", r.ErrorCode, r.MemberAssignment)
		}
	})
}

func TestPendingSyncExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		a := joinNew(t, c, "g", joinOpts{})
		b := joinNew(t, c, "g", joinOpts{})
		time.Sleep(200 * time.Millisecond)
		ra, rb := recv(t, a), recv(t, b)
		leader, follower := ra, rb
		if rb.LeaderID == rb.MemberID {
			leader, follower = rb, ra
		}
		recv(t, syncAsync(c, syncReq("g", leader.MemberID, leader.Generation, nil)))
		// The follower heartbeats but never syncs: after the rebalance
		// timeout it is removed and the group rebalances.
		for range 8 {
			time.Sleep(300 * time.Millisecond)
			heartbeat(c, "g", leader.MemberID, leader.Generation)
			heartbeat(c, "g", follower.MemberID, follower.Generation)
		}
		if code := heartbeat(c, "g", follower.MemberID, follower.Generation); code != codeUnknownMemberID {
			t.Fatalf("unsynced member: %d", code)
		}
		if code := heartbeat(c, "g", leader.MemberID, leader.Generation); code != codeRebalanceInProgress {
			t.Fatalf("leader: %d", code)
		}
	})
}

func TestLeaveGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		ids, gen := stableGroup(t, c, "g", 2)
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 5
		req.Group = "g"
		for _, id := range []string{ids[1], "nobody"} {
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = id
			req.Members = append(req.Members, m)
		}
		resp := c.LeaveGroup(req)
		if resp.ErrorCode != 0 || resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != codeUnknownMemberID {
			t.Fatalf("leave: %+v", resp)
		}
		if code := heartbeat(c, "g", ids[0], gen); code != codeRebalanceInProgress {
			t.Fatalf("after leave: %d", code)
		}
		old := kmsg.NewPtrLeaveGroupRequest()
		old.Version = 1
		old.Group, old.MemberID = "g", "nobody"
		if code := c.LeaveGroup(old).ErrorCode; code != codeUnknownMemberID {
			t.Fatalf("v1 unknown member: %d", code)
		}
	})
}

func TestStaticMemberRejoinWithoutRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, nil)
		inst := kmsg.StringPtr("host-1")
		ch := joinAsync(c, classicJoinReq("g", joinOpts{instance: inst}))
		time.Sleep(200 * time.Millisecond)
		r := recv(t, ch)
		if r.ErrorCode != 0 {
			t.Fatalf("static join: %d", r.ErrorCode)
		}
		old, gen := r.MemberID, r.Generation
		if s := recv(t, syncAsync(c, syncReq("g", old, gen, map[string][]byte{old: []byte("asg")}))); s.ErrorCode != 0 {
			t.Fatalf("sync: %d", s.ErrorCode)
		}
		// The process restarts: same instance id, no member id, same
		// metadata. It takes over without a rebalance.
		r2 := recv(t, joinAsync(c, classicJoinReq("g", joinOpts{instance: inst})))
		if r2.ErrorCode != 0 || r2.Generation != gen || r2.MemberID == old {
			t.Fatalf("rejoin: code %d gen %d (was %d) member %s", r2.ErrorCode, r2.Generation, gen, r2.MemberID)
		}
		// v9: it is told it leads but must skip the assignment.
		if !r2.SkipAssignment || r2.LeaderID != r2.MemberID {
			t.Fatalf("skip assignment %v leader %s", r2.SkipAssignment, r2.LeaderID)
		}
		s := recv(t, syncAsync(c, syncReq("g", r2.MemberID, gen, nil)))
		if s.ErrorCode != 0 || string(s.MemberAssignment) != "asg" {
			t.Fatalf("sync after rejoin: %d %q", s.ErrorCode, s.MemberAssignment)
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = 4
		hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", old, gen, inst
		if code := c.Heartbeat(hb).ErrorCode; code != codeFencedInstanceID {
			t.Fatalf("old process heartbeat: %d", code)
		}
		// The new member id was persisted.
		c.Close()
		c2 := startCoord(t, l, nil)
		hb.MemberID = r2.MemberID
		if code := c2.Heartbeat(hb).ErrorCode; code != 0 {
			t.Fatalf("heartbeat after reload: %d", code)
		}
	})
}

func TestOffsetCommitValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		// Simple commits to a group with no members.
		if code := commit(c, "simple", "", -1, "t", 0, 5, "m"); code != 0 {
			t.Fatalf("simple commit: %d", code)
		}
		if code := commit(c, "nogroup", "m", 3, "t", 0, 5, ""); code != codeIllegalGeneration {
			t.Fatalf("commit to unknown group with a generation: %d", code)
		}
		ids, gen := stableGroup(t, c, "g", 1)
		for _, tc := range []struct {
			member string
			gen    int32
			meta   string
			code   int16
		}{
			{ids[0], gen, "ok", 0},
			{ids[0], gen - 1, "", codeIllegalGeneration},
			{"nobody", gen, "", codeUnknownMemberID},
			{"", -1, "", codeUnknownMemberID},
			{ids[0], gen, string(make([]byte, 4097)), codeOffsetMetadataTooLarge},
		} {
			if code := commit(c, "g", tc.member, tc.gen, "t", 0, 10, tc.meta); code != tc.code {
				t.Errorf("commit member %q gen %d: %d, want %d", tc.member, tc.gen, code, tc.code)
			}
		}
		if off, code := fetched(c, "g", "t", 0); off != 10 || code != 0 {
			t.Fatalf("fetch: %d %d", off, code)
		}
		if off, _ := fetched(c, "g", "t", 1); off != -1 {
			t.Fatalf("fetch uncommitted: %d", off)
		}
		if off, _ := fetched(c, "simple", "t", 0); off != 5 {
			t.Fatalf("fetch simple: %d", off)
		}
	})
}

func TestCommitFailureIsNotAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, nil)
		if code := commit(c, "g", "", -1, "t", 0, 1, ""); code != 0 {
			t.Fatal(code)
		}
		l.fail = errors.New("disk on fire")
		if code := commit(c, "g", "", -1, "t", 0, 2, ""); code != codeCoordinatorNotAvailable {
			t.Fatalf("failed append: %d", code)
		}
		if off, _ := fetched(c, "g", "t", 0); off != 1 {
			t.Fatalf("offset after failed commit: %d", off)
		}
	})
}

func TestReloadOffsetsAndGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, nil)
		ids, gen := stableGroup(t, c, "g", 2)
		commit(c, "g", ids[0], gen, "t", 0, 42, "meta")
		commit(c, "g", ids[1], gen, "t", 1, 43, "")
		commit(c, "simple", "", -1, "u", 3, 7, "")
		c.Close()

		c2 := startCoord(t, l, nil)
		if off, _ := fetched(c2, "g", "t", 0); off != 42 {
			t.Fatalf("reloaded offset: %d", off)
		}
		if off, _ := fetched(c2, "simple", "u", 3); off != 7 {
			t.Fatalf("reloaded simple offset: %d", off)
		}
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Version = 5
		d.Groups = []string{"g"}
		dg := c2.DescribeGroups(d).Groups[0]
		if dg.State != "Stable" || dg.Protocol != "range" || len(dg.Members) != 2 || string(dg.Members[0].MemberAssignment) == "" {
			t.Fatalf("reloaded group: %+v", dg)
		}
		// Members must heartbeat within their session after a load.
		if code := heartbeat(c2, "g", ids[0], gen); code != 0 {
			t.Fatalf("heartbeat after load: %d", code)
		}
		time.Sleep(1500 * time.Millisecond)
		if code := heartbeat(c2, "g", ids[0], gen); code != codeUnknownMemberID {
			t.Fatalf("expired after load: %d", code)
		}
	})
}

func TestLoadInProgressAndNotCoordinator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.NumPartitions = 2
		c := New(cfg)
		defer c.Close()
		block := make(chan struct{})
		p := PartitionFor("g", 2)
		c.Elect(p, &blockingLog{release: block})
		if code := commit(c, "g", "", -1, "t", 0, 1, ""); code != codeCoordinatorLoadInProgress {
			t.Fatalf("while loading: %d", code)
		}
		if code := heartbeat(c, "g", "m", 1); code != 0 {
			t.Fatalf("heartbeat while loading: %d", code)
		}
		other := "a"
		for PartitionFor(other, 2) == p {
			other += "a"
		}
		if code := commit(c, other, "", -1, "t", 0, 1, ""); code != codeNotCoordinator {
			t.Fatalf("other partition: %d", code)
		}
		close(block)
		synctest.Wait()
		if code := commit(c, "g", "", -1, "t", 0, 1, ""); code != 0 {
			t.Fatalf("after load: %d", code)
		}
		c.Resign(p)
		if code := commit(c, "g", "", -1, "t", 0, 1, ""); code != codeNotCoordinator {
			t.Fatalf("after resign: %d", code)
		}
	})
}

type blockingLog struct {
	testLog
	release chan struct{}
}

func (l *blockingLog) Replay(fn func([]byte) error) error {
	<-l.release
	return l.testLog.Replay(fn)
}

func TestResignAnswersWaitingJoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, func(c *Config) { c.InitialRebalanceDelayMs = 10000 })
		ch := joinNew(t, c, "g", joinOpts{})
		pending(t, ch)
		c.Resign(0)
		if r := recv(t, ch); r.ErrorCode != codeNotCoordinator {
			t.Fatalf("code %d", r.ErrorCode)
		}
	})
}

func TestDeleteGroupsAndOffsetDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, nil)
		ids, gen := stableGroup(t, c, "g", 1)
		commit(c, "g", ids[0], gen, "t", 0, 1, "")
		commit(c, "g", ids[0], gen, "other", 0, 1, "")
		del := func(g string) int16 {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{g}
			return c.DeleteGroups(r).Groups[0].ErrorCode
		}
		if code := del("g"); code != codeNonEmptyGroup {
			t.Fatalf("delete non-empty: %d", code)
		}
		if code := del("nope"); code != codeGroupIDNotFound {
			t.Fatalf("delete unknown: %d", code)
		}
		od := func(topic string) (int16, int16) {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "g"
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			resp := c.OffsetDelete(r)
			return resp.ErrorCode, resp.Topics[0].Partitions[0].ErrorCode
		}
		if top, part := od("t"); top != 0 || part != codeGroupSubscribedToTopic {
			t.Fatalf("offset delete subscribed: %d %d", top, part)
		}
		if top, part := od("other"); top != 0 || part != 0 {
			t.Fatalf("offset delete unsubscribed: %d %d", top, part)
		}
		if off, _ := fetched(c, "g", "other", 0); off != -1 {
			t.Fatalf("deleted offset still there: %d", off)
		}
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Version = 1
		lv.Group, lv.MemberID = "g", ids[0]
		c.LeaveGroup(lv)
		synctest.Wait()
		if code := del("g"); code != 0 {
			t.Fatalf("delete empty: %d", code)
		}
		c.Close()
		c2 := startCoord(t, l, nil)
		if off, _ := fetched(c2, "g", "t", 0); off != -1 {
			t.Fatalf("offset of deleted group after reload: %d", off)
		}
		lg := c2.ListGroups(kmsg.NewPtrListGroupsRequest())
		if len(lg.Groups) != 0 {
			t.Fatalf("groups after delete and reload: %+v", lg.Groups)
		}
	})
}

func TestOffsetsRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, func(c *Config) { c.RetentionCheckIntervalMs = 10_000 })
		ids, gen := stableGroup(t, c, "g", 1)
		commit(c, "g", ids[0], gen, "t", 0, 1, "")
		commit(c, "simple", "", -1, "t", 0, 1, "")
		// A Stable group subscribed to t keeps its offsets; the simple
		// group's expire a minute after the commit.
		for range 140 {
			time.Sleep(500 * time.Millisecond)
			heartbeat(c, "g", ids[0], gen)
		}
		synctest.Wait()
		if off, _ := fetched(c, "simple", "t", 0); off != -1 {
			t.Fatalf("simple offset not expired: %d", off)
		}
		if off, _ := fetched(c, "g", "t", 0); off != 1 {
			t.Fatalf("stable group's offset expired: %d", off)
		}
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Version = 1
		lv.Group, lv.MemberID = "g", ids[0]
		c.LeaveGroup(lv)
		time.Sleep(50 * time.Second)
		synctest.Wait()
		if off, _ := fetched(c, "g", "t", 0); off != 1 {
			t.Fatalf("expired before retention since empty: %d", off)
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if off, _ := fetched(c, "g", "t", 0); off != -1 {
			t.Fatalf("not expired after retention since empty: %d", off)
		}
		if gs := c.ListGroups(kmsg.NewPtrListGroupsRequest()).Groups; len(gs) != 0 {
			t.Fatalf("expired groups still listed: %+v", gs)
		}
		c.Close()
		c2 := startCoord(t, l, nil)
		if off, _ := fetched(c2, "g", "t", 0); off != -1 {
			t.Fatalf("expired offset back after reload: %d", off)
		}
	})
}

func TestListAndDescribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCoord(t, &testLog{}, nil)
		stableGroup(t, c, "g", 2)
		commit(c, "simple", "", -1, "t", 0, 1, "")
		lr := kmsg.NewPtrListGroupsRequest()
		lr.Version = 5
		lr.StatesFilter = []string{"stable"}
		gs := c.ListGroups(lr).Groups
		if len(gs) != 1 || gs[0].Group != "g" || gs[0].GroupState != "Stable" || gs[0].GroupType != "classic" || gs[0].ProtocolType != "consumer" {
			t.Fatalf("list stable: %+v", gs)
		}
		lr.StatesFilter, lr.TypesFilter = nil, []string{"consumer"}
		if gs := c.ListGroups(lr).Groups; len(gs) != 0 {
			t.Fatalf("type filter: %+v", gs)
		}
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Version = 6
		d.Groups = []string{"nope", "simple"}
		resp := c.DescribeGroups(d)
		if resp.Groups[0].ErrorCode != codeGroupIDNotFound || resp.Groups[1].State != "Empty" {
			t.Fatalf("describe: %+v", resp.Groups)
		}
		d.Version = 5
		if g := c.DescribeGroups(d).Groups[0]; g.ErrorCode != 0 || g.State != "Dead" {
			t.Fatalf("describe v5 unknown: %+v", g)
		}
	})
}

func TestPartitionForMatchesKafka(t *testing.T) {
	// Values from Java: Utils.abs("...".hashCode()) % 50.
	for id, want := range map[string]int32{"": 0, "my-group": abs32(javaHash("my-group")) % 50, "console-consumer-1": abs32(javaHash("console-consumer-1")) % 50} {
		if got := PartitionFor(id, 50); got != want {
			t.Errorf("%q: %d, want %d", id, got, want)
		}
	}
	// "polygenelubricants".hashCode() == Integer.MIN_VALUE: abs is 0.
	if got := PartitionFor("polygenelubricants", 50); got != 0 {
		t.Errorf("MIN_VALUE hash: %d", got)
	}
	if got := javaHash("hello"); got != 99162322 {
		t.Errorf("hash(hello) = %d", got)
	}
}

func javaHash(s string) int32 {
	var h int32
	for _, r := range s {
		h = 31*h + int32(r)
	}
	return h
}

func abs32(h int32) int32 {
	if h < 0 {
		return -h
	}
	return h
}
