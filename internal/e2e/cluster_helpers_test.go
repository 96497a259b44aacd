package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// startZKBrokers starts brokers 1, 2 and 3 on ZooKeeper connect string
// connect with the given --set items, and returns them by id with their
// addresses (the seeds, in id order).
func startZKBrokers(t *testing.T, connect string, sets []string) (map[int32]*testenv.Broker, []string) {
	t.Helper()
	bs := map[int32]*testenv.Broker{}
	var seeds []string
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Sets: sets, Args: []string{"--zookeeper", connect}})
		bs[int32(id)] = b
		seeds = append(seeds, b.Addr())
	}
	return bs, seeds
}

// createReplicatedTopic creates topic with RF=3 through any of seeds.
func createReplicatedTopic(t *testing.T, ctx context.Context, seeds []string, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	if r, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
}

// clusterMetadata asks for topic's metadata with a fresh client, so that
// no cached view hides a change (opts: the client's, e.g. TLS and SASL).
func clusterMetadata(ctx context.Context, seeds []string, topic string, opts ...kgo.Opt) (kadm.Metadata, error) {
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer c.Close()
	mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
	defer mcancel()
	return kadm.NewClient(c).Metadata(mctx, topic)
}
