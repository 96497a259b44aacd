package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestAdminClusterCommands runs a rebalance onto a new broker (its dry run
// tells the bytes to copy; its progress is one short line, not one naming
// every partition), a decommission of a broker that does not exist
// (refused, where it answered success), and cluster check before and
// after a broker stops, on a ZooKeeper cluster of three brokers.
func TestAdminClusterCommands(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	sets := []string{"auto.leader.rebalance.enable=false", "zookeeper.session.timeout.ms=6000", "replica.lag.time.max.ms=3000"}
	start := func(id int) *testenv.Broker {
		return testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Sets: sets, Args: []string{"--zookeeper", zk.Addr() + "/admin"}})
	}
	b1, b2 := start(1), start(2)
	seeds := b1.Addr() + "," + b2.Addr()
	adm := kadm.NewClient(newTestClient(t, b1.Addr(), b2.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	brokersLive := func(n int) func() error {
		return func() error {
			bs, err := adm.ListBrokers(ctx)
			if err == nil && len(bs) != n {
				err = fmt.Errorf("%d brokers", len(bs))
			}
			return err
		}
	}
	waitFor(t, time.Minute, "two brokers", brokersLive(2))
	wantRun(t, "create", admin(t, seeds, "create", "m", "-p", "4", "-r", "2"), 0, []string{"created m"}, nil)
	prod, err := kgo.NewClient(kgo.SeedBrokers(b1.Addr(), b2.Addr()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	val := []byte(strings.Repeat("v", 2000))
	for range 200 {
		prod.Produce(ctx, &kgo.Record{Topic: "m", Value: val}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Metadata from a new client each time: a client's own may lag.
	metadata := func() (kadm.Metadata, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b1.Addr(), b2.Addr()))
		if err != nil {
			return kadm.Metadata{}, err
		}
		defer cl.Close()
		return kadm.NewClient(cl).Metadata(ctx, "m")
	}
	fullISR := func() error {
		md, err := metadata()
		if err != nil {
			return err
		}
		for _, p := range md.Topics["m"].Partitions {
			if len(p.ISR) != len(p.Replicas) {
				return fmt.Errorf("m-%d: ISR %v of %v", p.Partition, p.ISR, p.Replicas)
			}
		}
		return nil
	}
	waitFor(t, time.Minute, "full ISR", fullISR)
	wantRun(t, "cluster check, healthy", admin(t, seeds, "cluster", "check"), 0, []string{"0 offline, 0 under min ISR, 0 under-replicated"}, nil)

	// A broker that does not exist: refused, naming the live ones.
	wantRun(t, "decommission 9", admin(t, seeds, "broker", "decommission", "9"), 1, nil, []string{"broker 9 is not in the cluster", "live brokers: 1, 2"})

	b3 := start(3)
	waitFor(t, time.Minute, "three brokers", brokersLive(3))
	r := admin(t, seeds, "cluster", "rebalance")
	wantRun(t, "rebalance dry run", r, 0, []string{"dry run", "to copy: about "}, nil)
	if strings.Contains(r.stdout, "to copy: about 0 B") {
		t.Errorf("rebalance dry run copies nothing: %v", r)
	}
	r = admin(t, seeds, "cluster", "rebalance", "--execute")
	wantRun(t, "rebalance", r, 0, []string{"done:"}, nil)
	for l := range strings.Lines(r.stderr) {
		if len(l) > 160 {
			t.Errorf("rebalance: a progress line of %d bytes: %q", len(l), l)
		}
	}
	waitFor(t, time.Minute, "full ISR after the rebalance", fullISR)
	on3 := 0
	md, err := metadata()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics["m"].Partitions {
		for _, rep := range p.Replicas {
			if rep == 3 {
				on3++
			}
		}
	}
	if on3 == 0 {
		t.Errorf("no replica on broker 3 after the rebalance:\n%v", r)
	}

	// Broker 3 stops: its partitions are under-replicated; exit 3.
	b3.Stop()
	var rep checkReport
	waitFor(t, time.Minute, "under-replicated partitions", func() error {
		r := admin(t, seeds, "cluster", "check", "--json")
		if r.code != exitProblems {
			return fmt.Errorf("%v", r)
		}
		return jsonUnmarshal(r.stdout, &rep)
	})
	if rep.UnderReplicated != on3 || rep.Offline != 0 || rep.Partitions != 4 || len(rep.Problems) != on3 || rep.Problems[0].Problems[0] != "under-replicated" {
		t.Errorf("cluster check --json with broker 3 stopped (%d replicas on it): %s", on3, jsonOf(rep))
	}
	r = admin(t, seeds, "cluster", "check")
	wantRun(t, "cluster check, broker 3 stopped", r, exitProblems, []string{"PROBLEMS", "under-replicated", fmt.Sprintf("4 partitions: 0 offline, 0 under min ISR, %d under-replicated", on3)}, nil)
}
