package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestAdminAgainstBroker runs the topic, tier, group, config and cluster
// commands against one real broker with a file tier, and checks their
// tables and JSON against what a franz-go client sees.
func TestAdminAgainstBroker(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Args:    []string{"--tier", "file://" + t.TempDir()},
		Sets:    []string{"remote.log.manager.task.interval.ms=500", "log.retention.check.interval.ms=500", "group.initial.rebalance.delay.ms=0"},
		Metrics: "127.0.0.1:0",
	})
	addr := b.Addr()
	cl := newTestClient(t, addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The bootstrap: $BOOTSTRAP when there is no --bootstrap; the flag
	// wins over it.
	r := strataCLI(t, []string{"BOOTSTRAP=" + addr}, "admin", "create", "tiered", "-p", "2",
		"-c", "remote.storage.enable=true", "-c", "segment.bytes=16384", "-c", "local.retention.ms=500")
	wantRun(t, "create with $BOOTSTRAP", r, 0, []string{"created tiered"}, nil)
	r = strataCLI(t, []string{"BOOTSTRAP=127.0.0.1:1"}, "admin", "--bootstrap", addr, "topics")
	wantRun(t, "topics with --bootstrap over $BOOTSTRAP", r, 0, []string{"tiered\n"}, nil)
	r = strataCLI(t, []string{"BOOTSTRAP=127.0.0.1:1"}, "admin", "topics")
	wantRun(t, "topics with a wrong $BOOTSTRAP", r, 1, nil, []string{"127.0.0.1:1"})
	r = strataCLI(t, []string{"BOOTSTRAP=127.0.0.1:1", "STRATA_BOOTSTRAP=" + addr}, "admin", "topics")
	wantRun(t, "topics with $STRATA_BOOTSTRAP over $BOOTSTRAP", r, 0, []string{"tiered\n"}, nil)

	// create names the config the broker refuses, as alter does.
	wantRun(t, "create with an unknown config", admin(t, addr, "create", "bad", "-c", "no.such.config=1"), 1, nil, []string{"create bad: ", "no.such.config"})
	wantRun(t, "create again", admin(t, addr, "create", "tiered"), 1, nil, []string{"TOPIC_ALREADY_EXISTS"})

	// Records in partition 0: about 120 kB, so some 7 segments of 16 kB.
	const n = 120
	val := []byte(strings.Repeat("x", 1000))
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "tiered", Partition: 0, Value: val, Key: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// tier: segments go to the bucket and leave the disk.
	var tier struct {
		Partitions []tierRow    `json:"partitions"`
		Brokers    []tierBroker `json:"brokers"`
	}
	waitFor(t, time.Minute, "partition 0 tiered and deleted locally", func() error {
		adminJSON(t, addr, &tier, "tier", "tiered", "--metrics", b.MetricsAddr())
		p := tier.Partitions[0]
		if len(tier.Partitions) != 2 || p.LastTiered == nil || p.LocalStart == nil || *p.LocalStart == 0 || p.RemoteBytes == nil || *p.RemoteBytes == 0 {
			return fmt.Errorf("%+v", tier.Partitions)
		}
		return nil
	})
	p0, p1 := tier.Partitions[0], tier.Partitions[1]
	if !p0.Tiered || *p0.LogStart != 0 || *p0.End != n || *p0.LastTiered >= n || *p0.UploadLag != n-*p0.LastTiered-1 ||
		*p0.LocalStart > *p0.LastTiered+1 || *p0.LocalBytes == 0 || p0.Error != "" {
		t.Errorf("tier partition 0: %s", jsonOf(p0))
	}
	if !p1.Tiered || *p1.End != 0 || p1.LastTiered != nil || *p1.UploadLag != 0 || *p1.LocalBytes != 0 {
		t.Errorf("tier partition 1 (empty): %s", jsonOf(p1))
	}
	if len(tier.Brokers) != 1 || tier.Brokers[0].Error != "" || tier.Brokers[0].CopiedBytes == nil || *tier.Brokers[0].CopiedBytes <= 0 ||
		tier.Brokers[0].CopyLagBytes == nil {
		t.Errorf("tier brokers: %s", jsonOf(tier.Brokers))
	}
	// The table, with $METRICS as cluster.env exports it (a URL).
	r = strataCLI(t, []string{"BOOTSTRAP=" + addr, "METRICS=http://" + b.MetricsAddr() + "/metrics"}, "admin", "tier", "tiered")
	if sq := squash(r.stdout); r.code != 0 || !strings.Contains(sq, "TOPIC PARTITION LEADER TIERED LOG_START LOCAL_START LAST_TIERED END UPLOAD_LAG LOCAL REMOTE ERROR\n") ||
		!strings.Contains(sq, "\ntiered 1 0 true 0 0 - 0 0 0 B 0 B\n") ||
		!strings.Contains(sq, fmt.Sprintf("\ntiered 0 0 true 0 %d %d %d %d ", *p0.LocalStart, *p0.LastTiered, n, *p0.UploadLag)) ||
		!strings.Contains(sq, "\nMETRICS UPLOAD_LAG LAG_SEGMENTS LAG_TIME COPIED REMOTE_READ BUCKET_REQUESTS COST ERROR\nhttp://"+b.MetricsAddr()+"/metrics 0 B 0 ") {
		t.Errorf("tier table: %v", r)
	}
	r = admin(t, addr, "tier", "tiered")
	wantRun(t, "tier without metrics", r, 0, []string{"per broker: n/a (give --metrics"}, nil)
	r = admin(t, addr, "tier", "--metrics", "127.0.0.1:1")
	wantRun(t, "tier with a broker that does not answer", r, 0, []string{"127.0.0.1:1/metrics", "connection refused"}, nil)

	// describe: the same sizes, and offsets.
	var rows []describeRow
	adminJSON(t, addr, &rows, "describe", "tiered")
	if len(rows) != 2 || *rows[0].Start != 0 || *rows[0].End != n || rows[0].LocalBytes == nil || rows[0].RemoteBytes == nil || *rows[0].RemoteBytes == 0 ||
		rows[0].Leader != 0 || len(rows[0].Replicas) != 1 {
		t.Errorf("describe --json: %s", jsonOf(rows))
	}
	r = admin(t, addr, "describe", "tiered", "nosuch")
	wantRun(t, "describe with a missing topic", r, 1, []string{"LOCAL", "REMOTE", "nosuch", "UNKNOWN_TOPIC_OR_PARTITION"}, []string{"errors in 1 row"})

	// groups.
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: "tiered", Partition: 0, At: 5, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: "tiered", Partition: 1, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g1", commit); err != nil {
		t.Fatal(err)
	}
	var groups []groupRow
	adminJSON(t, addr, &groups, "groups")
	if len(groups) != 1 || groups[0].Group != "g1" || groups[0].State != "Empty" {
		t.Errorf("groups --json: %s", jsonOf(groups))
	}
	r = admin(t, addr, "groups", "describe", "g1")
	wantRun(t, "groups describe", r, 0, []string{"group g1: state Empty, 0 members", fmt.Sprintf("total lag %d", n-5), "TOPIC   PARTITION  CURRENT  END  LAG",
		fmt.Sprintf("tiered  0          5        %d  %d", n, n-5)}, nil)
	committed := func(p int32) int64 {
		t.Helper()
		os, err := adm.FetchOffsets(ctx, "g1")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := os.Lookup("tiered", p)
		return o.At
	}
	r = admin(t, addr, "groups", "reset", "g1", "--to-latest", "--topic", "tiered")
	wantRun(t, "reset dry run", r, 0, []string{"GROUP  TOPIC   PARTITION  CURRENT  NEW", fmt.Sprintf("g1     tiered  0          5        %d", n), "dry run: nothing committed"}, nil)
	if c := committed(0); c != 5 {
		t.Errorf("after a dry run: committed %d, want 5", c)
	}
	var reset struct {
		Executed   bool       `json:"executed"`
		Partitions []resetRow `json:"partitions"`
	}
	adminJSON(t, addr, &reset, "groups", "reset", "g1", "--to-latest", "--all-topics", "--execute")
	if !reset.Executed || len(reset.Partitions) != 2 || reset.Partitions[0].New != n || committed(0) != n {
		t.Errorf("reset --to-latest --execute: %s; committed %d", jsonOf(reset), committed(0))
	}
	wantRun(t, "reset --shift-by", admin(t, addr, "groups", "reset", "g1", "--shift-by", "-3", "--topic", "tiered:0", "--execute"), 0, []string{"committed the new offsets of 1 partitions"}, nil)
	if c := committed(0); c != n-3 {
		t.Errorf("after --shift-by -3: %d", c)
	}
	wantRun(t, "reset --shift-by beyond the end", admin(t, addr, "groups", "reset", "g1", "--shift-by", "1000", "--topic", "tiered:0", "--execute"), 0, nil, nil)
	if c := committed(0); c != n {
		t.Errorf("after --shift-by 1000: %d, want the end %d", c, n)
	}
	wantRun(t, "reset --to-earliest", admin(t, addr, "groups", "reset", "g1", "--to-earliest", "--all-topics", "--execute"), 0, nil, nil)
	if c := committed(0); c != 0 {
		t.Errorf("after --to-earliest: %d", c)
	}
	wantRun(t, "reset --to-offset", admin(t, addr, "groups", "reset", "g1", "--to-offset", "17", "--topic", "tiered:0", "--execute"), 0, nil, nil)
	if c := committed(0); c != 17 {
		t.Errorf("after --to-offset 17: %d", c)
	}
	wantRun(t, "reset --to-datetime in the future", admin(t, addr, "groups", "reset", "g1", "--to-datetime", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--topic", "tiered:0", "--execute"), 0, nil, nil)
	if c := committed(0); c != n {
		t.Errorf("after --to-datetime in an hour: %d, want the end %d", c, n)
	}
	wantRun(t, "reset --to-datetime in the past", admin(t, addr, "groups", "reset", "g1", "--to-datetime", "2000-01-01T00:00:00Z", "--topic", "tiered:0", "--execute"), 0, nil, nil)
	if c := committed(0); c != 0 {
		t.Errorf("after --to-datetime 2000: %d, want 0", c)
	}
	// --export writes what --from-file reads.
	r = admin(t, addr, "groups", "reset", "g1", "--to-offset", "42", "--topic", "tiered", "--export")
	if r.code != 0 || r.stdout != "tiered,0,42\ntiered,1,0\n" {
		t.Errorf("--export: %v", r)
	}
	file := filepath.Join(t.TempDir(), "offsets.csv")
	if err := os.WriteFile(file, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	wantRun(t, "reset --from-file", admin(t, addr, "groups", "reset", "g1", "--from-file", file, "--execute"), 0, nil, nil)
	if c := committed(0); c != 42 {
		t.Errorf("after --from-file: %d", c)
	}
	os.WriteFile(file, []byte("tiered,zero,1\n"), 0o644)
	wantRun(t, "reset --from-file bad", admin(t, addr, "groups", "reset", "g1", "--from-file", file), 2, nil, []string{`line 1: "tiered,zero,1"`})
	wantRun(t, "reset a partition that does not exist", admin(t, addr, "groups", "reset", "g1", "--to-earliest", "--topic", "tiered:7"), 1, nil, []string{"no partition 7"})

	// A group with a member: reset and delete refused.
	mcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g2"), kgo.ConsumeTopics("tiered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer mcl.Close()
	waitFor(t, 30*time.Second, "g2 stable with a member", func() error {
		mcl.PollRecords(ctx, 10) // joins
		dg, err := adm.DescribeGroups(ctx, "g2")
		if err == nil && (dg["g2"].State != "Stable" || len(dg["g2"].Members) != 1) {
			err = fmt.Errorf("state %s, %d members", dg["g2"].State, len(dg["g2"].Members))
		}
		return err
	})
	wantRun(t, "reset a group with a member", admin(t, addr, "groups", "reset", "g2", "--to-earliest", "--all-topics", "--execute"), 1, nil, []string{"1 active members (state Stable)", "stop its consumers first"})
	wantRun(t, "delete a group with a member", admin(t, addr, "groups", "delete", "g2"), 1, nil, []string{"NON_EMPTY_GROUP"})
	r = admin(t, addr, "groups", "describe", "g2")
	wantRun(t, "describe a group with a member", r, 0, []string{"group g2: state Stable, 1 members"}, nil)
	mcl.Close()
	wantRun(t, "delete g1", admin(t, addr, "groups", "delete", "g1"), 0, []string{"deleted group g1"}, nil)

	// configs and alter, of topics and brokers.
	wantRun(t, "alter topic", admin(t, addr, "alter", "tiered", "retention.ms=3600000"), 0, []string{"altered topic tiered"}, nil)
	var cfgs []configRow
	adminJSON(t, addr, &cfgs, "configs", "tiered")
	if v := configValue(cfgs, "retention.ms"); v != "3600000 DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("configs tiered: retention.ms %s", v)
	}
	wantRun(t, "alter topic unknown", admin(t, addr, "alter", "tiered", "no.such.config=1"), 1, nil, []string{"no.such.config"})
	wantRun(t, "alter broker", admin(t, addr, "alter", "--broker", "0", "leader.replication.throttled.rate=1000000"), 0, []string{"altered broker 0"}, nil)
	adminJSON(t, addr, &cfgs, "configs", "--broker", "0")
	if v := configValue(cfgs, "leader.replication.throttled.rate"); v != "1000000 DYNAMIC_BROKER_CONFIG" {
		t.Errorf("configs --broker 0: %s", v)
	}
	wantRun(t, "alter broker default", admin(t, addr, "alter", "--broker-default", "min.insync.replicas=1"), 0, []string{"altered the cluster-wide broker defaults"}, nil)
	r = admin(t, addr, "configs", "--broker-default")
	wantRun(t, "configs --broker-default", r, 0, []string{"min.insync.replicas", "DYNAMIC_DEFAULT_BROKER_CONFIG"}, nil)
	wantRun(t, "alter broker unknown", admin(t, addr, "alter", "--broker", "0", "no.such.config=1"), 1, nil, []string{"no.such.config"})
	wantRun(t, "alter broker delete", admin(t, addr, "alter", "--broker", "0", "leader.replication.throttled.rate="), 0, nil, nil)
	adminJSON(t, addr, &cfgs, "configs", "--broker", "0")
	if v := configValue(cfgs, "leader.replication.throttled.rate"); strings.HasSuffix(v, "DYNAMIC_BROKER_CONFIG") {
		t.Errorf("configs --broker 0 after deleting: %s", v)
	}

	// cluster.
	var brokers struct {
		Controller int32       `json:"controller"`
		Brokers    []brokerRow `json:"brokers"`
	}
	adminJSON(t, addr, &brokers, "cluster", "brokers")
	if brokers.Controller != 0 || len(brokers.Brokers) != 1 || !brokers.Brokers[0].Controller || fmt.Sprintf("%s:%d", brokers.Brokers[0].Host, brokers.Brokers[0].Port) != addr {
		t.Errorf("cluster brokers --json: %s", jsonOf(brokers))
	}
	wantRun(t, "cluster brokers", admin(t, addr, "cluster", "brokers"), 0, []string{"controller 0, 1 brokers", "ID  ADDRESS", "0   " + addr}, nil)
	wantRun(t, "cluster check", admin(t, addr, "cluster", "check"), 0, []string{"0 offline, 0 under min ISR, 0 under-replicated"}, nil)

	wantRun(t, "delete", admin(t, addr, "delete", "tiered", "nosuch"), 1, []string{"deleted tiered"}, []string{"delete nosuch: UNKNOWN_TOPIC_OR_PARTITION"})
	var topics []string
	adminJSON(t, addr, &topics, "topics", "list")
	if len(topics) != 0 {
		t.Errorf("topics after delete: %v", topics)
	}
}

// configValue is "value source" of key in rows.
func configValue(rows []configRow, key string) string {
	for _, r := range rows {
		if r.Key == key {
			v := "null"
			if r.Value != nil {
				v = *r.Value
			}
			return v + " " + r.Source
		}
	}
	return "missing"
}

// squash collapses the runs of spaces of a table, and trims each line.
func squash(s string) string {
	var lines []string
	for l := range strings.Lines(s) {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n") + "\n"
}
