package zk

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"strata/controller"
)

func TestElectLeader(t *testing.T) {
	live := func(ids ...int32) map[int32]bool {
		m := map[int32]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	st := func(leader, epoch int32, isr ...int32) partitionState {
		return partitionState{Leader: leader, LeaderEpoch: epoch, ISR: isr}
	}
	replicas := []int32{1, 2, 3}
	for _, c := range []struct {
		name    string
		s       partitionState
		live    map[int32]bool
		unclean bool
		want    partitionState
		changed bool
	}{
		{"all alive", st(1, 4, 1, 2, 3), live(1, 2, 3), false, st(1, 4, 1, 2, 3), false},
		{"follower gone shrinks ISR", st(1, 4, 1, 2, 3), live(1, 3), false, st(1, 5, 1, 3), true},
		{"leader gone: next ISR member in replica order", st(1, 4, 3, 1, 2), live(2, 3), false, st(2, 5, 3, 2), true},
		{"leader gone, out-of-ISR replica not chosen", st(1, 4, 1, 3), live(2, 3), false, st(3, 5, 3), true},
		{"no live ISR member: offline, ISR kept", st(1, 4, 1), live(2, 3), false, st(-1, 5, 1), true},
		{"offline stays offline", st(-1, 5, 1), live(2, 3), false, st(-1, 5, 1), false},
		{"unclean election", st(1, 4, 1), live(3), true, st(3, 5, 3), true},
		{"offline partition recovers cleanly", st(-1, 5, 1), live(1, 3), false, st(1, 6, 1), true},
	} {
		got, changed := electLeader(replicas, c.s, c.live, c.unclean)
		if changed != c.changed || got.Leader != c.want.Leader || got.LeaderEpoch != c.want.LeaderEpoch || !slices.Equal(got.ISR, c.want.ISR) {
			t.Errorf("%s: got %+v changed %v, want %+v changed %v", c.name, got, changed, c.want, c.changed)
		}
	}
}

func TestAssignReplicas(t *testing.T) {
	rack := func(s string) *string { return &s }
	brokers := []controller.Broker{{ID: 3}, {ID: 1}, {ID: 2}, {ID: 4}}
	a, err := assignReplicas(brokers, 8, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for _, r := range a {
		if len(r) != 3 || len(slices.Compact(slices.Sorted(slices.Values(r)))) != 3 {
			t.Fatalf("replicas %v: want 3 distinct", r)
		}
		leaders[r[0]]++
	}
	for _, b := range brokers {
		if leaders[b.ID] != 2 {
			t.Errorf("leaders %v: want 2 each", leaders)
		}
	}
	if _, err := assignReplicas(brokers, 1, 5, 0); err == nil {
		t.Error("RF 5 on 4 brokers: want an error")
	}

	racked := []controller.Broker{{ID: 1, Rack: rack("a")}, {ID: 2, Rack: rack("a")}, {ID: 3, Rack: rack("b")}, {ID: 4, Rack: rack("b")}, {ID: 5, Rack: rack("c")}, {ID: 6, Rack: rack("c")}}
	rackOf := map[int32]string{}
	for _, b := range racked {
		rackOf[b.ID] = *b.Rack
	}
	a, err = assignReplicas(racked, 12, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range a {
		racks := map[string]bool{}
		for _, b := range r {
			racks[rackOf[b]] = true
		}
		if len(r) != 3 || len(racks) != 3 {
			t.Errorf("replicas %v span racks %v: want 3 racks", r, racks)
		}
	}
	a, _ = assignReplicas(racked, 4, 6, 0)
	for _, r := range a {
		if len(slices.Compact(slices.Sorted(slices.Values(r)))) != 6 {
			t.Errorf("RF 6 on 6 racked brokers: %v", r)
		}
	}
}

func TestSplitConnect(t *testing.T) {
	for _, c := range []struct {
		in      string
		servers []string
		chroot  string
	}{
		{"a:1", []string{"a:1"}, ""},
		{"a:1,b:2/kafka", []string{"a:1", "b:2"}, "/kafka"},
		{"a:1/x/y", []string{"a:1"}, "/x/y"},
		{"a:1/", []string{"a:1"}, ""},
	} {
		s, ch := splitConnect(c.in)
		if !slices.Equal(s, c.servers) || ch != c.chroot {
			t.Errorf("splitConnect(%q) = %v, %q", c.in, s, ch)
		}
	}
	if err := (&Options{Connect: "/x"}).Validate(); err == nil {
		t.Error("Validate of a connect string without servers: want an error")
	}
}

func TestZNodeRoundTrip(t *testing.T) {
	id := controller.NewTopicID()
	gotID, assign, err := decodeTopic(encodeTopic(id, [][]int32{{1, 2}, {2, 3}}))
	if err != nil || gotID != id || !slices.Equal(assign[1], []int32{2, 3}) {
		t.Errorf("topic round trip: %v %v %v", gotID, assign, err)
	}
	b, err := decodeBroker(7, encodeBroker(controller.Broker{ID: 7, Host: "::1", Port: 9092}))
	if err != nil || b.Host != "::1" || b.Port != 9092 {
		t.Errorf("broker round trip: %+v %v", b, err)
	}
}

// FuzzDecodeZNodes feeds arbitrary znode contents (ZooKeeper is shared
// with other tools) to the decoders: errors, never panics.
func FuzzDecodeZNodes(f *testing.F) {
	f.Add([]byte(`{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":{"0":[1,2,3]},"adding_replicas":{},"removing_replicas":{}}`))
	f.Add([]byte(`{"version":3,"partitions":{"5":[1]}}`))
	f.Add([]byte(`{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}`))
	f.Add([]byte(`{"endpoints":["PLAINTEXT://h:1"],"host":"h","port":1,"version":5}`))
	f.Add([]byte(`{"version":1,"broker":1,"block_start":"0","block_end":"999"}`))
	f.Add([]byte(`7`))
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeTopic(data)
		decodeState(data)
		decodeBroker(1, data)
		decodeConfig(data)
		decodeController(data)
		decodeProducerIDBlock(data)
	})
}

// TestBrokerZNodeListeners: every listener is registered as Kafka
// registers it, and registrations of older formats still read.
func TestBrokerZNodeListeners(t *testing.T) {
	b := controller.Broker{ID: 3, Host: "h1", Port: 9093, Endpoints: []controller.Endpoint{
		{Listener: "CLIENT", Host: "h1", Port: 9093, SecurityProtocol: 1},
		{Listener: "INTERNAL", Host: "10.0.0.1", Port: 9094, SecurityProtocol: 0},
	}}
	data := encodeBroker(b)
	var z map[string]any
	if err := json.Unmarshal(data, &z); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(z["endpoints"]) != "[CLIENT://h1:9093 INTERNAL://10.0.0.1:9094]" ||
		fmt.Sprint(z["listener_security_protocol_map"]) != "map[CLIENT:SSL INTERNAL:PLAINTEXT]" ||
		z["host"] != nil || z["port"] != float64(-1) {
		t.Fatalf("znode %s", data)
	}
	got, err := decodeBroker(3, data)
	if err != nil || !slices.Equal(got.Endpoints, b.Endpoints) || got.Host != "h1" || got.Port != 9093 {
		t.Fatalf("round trip %+v %v", got, err)
	}
	if h, p, ok := got.Endpoint("INTERNAL"); !ok || h != "10.0.0.1" || p != 9094 {
		t.Fatalf("INTERNAL = %s %d %v", h, p, ok)
	}
	if _, _, ok := got.Endpoint("OTHER"); ok {
		t.Fatal("a listener the broker lacks has an endpoint")
	}
	for _, old := range []string{
		`{"jmx_port":-1,"host":"old","port":9092,"version":1}`,                        // version 1: host and port only
		`{"endpoints":["PLAINTEXT://old:9092"],"host":"old","port":9092,"version":2}`, // version 2: PROTOCOL://
		`{"endpoints":["PLAINTEXT://old:9092"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"host":"old","port":9092,"version":5}`,
	} {
		got, err := decodeBroker(1, []byte(old))
		if err != nil || got.Host != "old" || got.Port != 9092 || len(got.Endpoints) != 1 || got.Endpoints[0].Listener != "PLAINTEXT" {
			t.Errorf("decode %s = %+v %v", old, got, err)
		}
	}
}
