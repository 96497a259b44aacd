package compat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// moduleVersion is the version of a Go module as go.mod requires it
// (test binaries carry no dependency list in their build info).
func moduleVersion(root, path string) string {
	data, _ := os.ReadFile(filepath.Join(root, "go.mod"))
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return ""
}

// values are the record values a check writes to topic.
func values(topic string, n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s-value-%d-%0*d", topic, i, i%13, 0)
	}
	return vs
}

// createTopic creates topic on seeds with franz-go's admin client, for
// clients whose own check is not about admin.
func createTopic(ctx context.Context, seeds []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// produceFranz writes values round-robin over partitions with franz-go.
func produceFranz(ctx context.Context, seeds []string, topic string, partitions int32, vs []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i, v := range vs {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(v)})
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

// committedSum is the sum of group's committed offsets on topic.
func committedSum(ctx context.Context, seeds []string, group, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	os, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err == nil {
		err = os.Error()
	}
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, o := range os[topic] {
		sum += o.At
	}
	return sum, nil
}

// sameSet reports whether got holds exactly the values of want.
func sameSet(got, want []string) error {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		return fmt.Errorf("read %d records, want the %d produced", len(got), len(want))
	}
	return nil
}

func runFranz(t *testing.T, e *env) {
	const client = "franz-go"
	e.rec.version(client, moduleVersion(e.root, "github.com/twmb/franz-go"))
	seeds := []string{e.addr}
	readBack := func(ctx context.Context, topic string, partitions int32, n int) ([]string, error) {
		ps := map[int32]kgo.Offset{}
		for p := range partitions {
			ps[p] = kgo.NewOffset().AtStart()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: ps}), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		var got []string
		for len(got) < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return got, fmt.Errorf("read %d of %d records: %w", len(got), n, ctx.Err())
			}
			if err := fs.Err0(); err != nil {
				return got, err
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return got, nil
	}
	produceCheck := func(topic string, opts ...kgo.Opt) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if err := createTopic(ctx, seeds, topic, 1); err != nil {
				return err
			}
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			vs := values(topic, records)
			var rs []*kgo.Record
			for _, v := range vs {
				rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(v)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			got, err := readBack(ctx, topic, 1, records)
			if err != nil {
				return err
			}
			if !slices.Equal(got, vs) {
				return fmt.Errorf("read back %d records, not the %d produced in order", len(got), records)
			}
			return nil
		}
	}
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		e.check(t, client, "produce-"+c.name, produceCheck("f-"+c.name, kgo.ProducerBatchCompression(c.codec), kgo.DisableIdempotentWrite()))
	}
	e.check(t, client, "produce-idempotent", produceCheck("f-idem")) // franz-go is idempotent by default
	e.check(t, client, "consume-partition", func(ctx context.Context) error {
		const topic = "f-assign"
		vs := values(topic, records)
		if err := createTopic(ctx, seeds, topic, 3); err != nil {
			return err
		}
		if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
			return err
		}
		got, err := readBack(ctx, topic, 3, records)
		if err != nil {
			return err
		}
		return sameSet(got, vs)
	})
	group := func(topic string, opts ...kgo.Opt) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			vs := values(topic, records)
			if err := createTopic(ctx, seeds, topic, 3); err != nil {
				return err
			}
			if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
				return err
			}
			g := topic + "-g"
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			var got []string
			for len(got) < records {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return fmt.Errorf("read %d of %d records: %w", len(got), records, ctx.Err())
				}
				if err := fs.Err0(); err != nil {
					return err
				}
				fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			if err := sameSet(got, vs); err != nil {
				return err
			}
			if sum, err := committedSum(ctx, seeds, g, topic); err != nil || sum != records {
				return fmt.Errorf("committed offsets sum to %d, want %d (%v)", sum, records, err)
			}
			return nil
		}
	}
	e.check(t, client, "group-default", group("f-grp-default"))
	e.check(t, client, "group-cooperative", group("f-grp-coop", kgo.Balancers(kgo.CooperativeStickyBalancer())))
	e.check(t, client, "group-kip848", func(ctx context.Context) error {
		const topic = "f-grp-848"
		if err := group(topic, kgo.ServerSideBalancer())(ctx); err != nil {
			return err
		}
		// The group must be a consumer (KIP-848) group, not a classic one.
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return err
		}
		defer cl.Close()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{topic + "-g"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return fmt.Errorf("ConsumerGroupDescribe of %s-g: %+v; franz-go did not use the consumer protocol", topic, resp.Groups)
		}
		return nil
	})
	e.check(t, client, "offsets", func(ctx context.Context) error {
		const topic, g = "f-offsets", "f-offsets-g"
		if err := createTopic(ctx, seeds, topic, 1); err != nil {
			return err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 17, LeaderEpoch: -1, Metadata: "meta"})
		if r, err := adm.CommitOffsets(ctx, g, os); err != nil || r.Error() != nil {
			return fmt.Errorf("commit: %v %v", err, r.Error())
		}
		f, err := adm.FetchOffsets(ctx, g)
		if err == nil {
			err = f.Error()
		}
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if o, ok := f.Lookup(topic, 0); !ok || o.At != 17 || o.Metadata != "meta" {
			return fmt.Errorf("fetched %+v, want offset 17 with metadata \"meta\"", o)
		}
		return nil
	})
	e.check(t, client, "admin", func(ctx context.Context) error {
		const topic = "f-admin"
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		ret := "3600000"
		if r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": &ret}, topic); err != nil || r.Err != nil {
			return fmt.Errorf("create: %v %v", err, r.Err)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return fmt.Errorf("describe configs: %w", err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			return fmt.Errorf("describe configs: %v %v", err, rc.Err)
		}
		found := false
		for _, c := range rc.Configs {
			found = found || (c.Key == "retention.ms" && c.MaybeValue() == ret)
		}
		if !found {
			return fmt.Errorf("describe configs lacks retention.ms=%s", ret)
		}
		if r, err := adm.DeleteTopic(ctx, topic); err != nil || r.Err != nil {
			return fmt.Errorf("delete: %v %v", err, r.Err)
		}
		for {
			td, err := adm.ListTopics(ctx)
			if err != nil {
				return err
			}
			if !td.Has(topic) {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("topic still listed after delete")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	e.check(t, client, "leader-change", func(ctx context.Context) error {
		const topic = "lc-franz-go"
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return err
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("before")}).FirstErr(); err != nil {
			return fmt.Errorf("produce before: %w", err)
		}
		if err := e.moveLeader(ctx, topic); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr(); err != nil {
			return fmt.Errorf("produce after the leader moved: %w", err)
		}
		// A direct request: kadm.Metadata answers from a cache of its own
		// (MetadataMinAge), which the producer's refresh does not update.
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Leader != newLeader {
			return fmt.Errorf("metadata %+v, want leader %d", resp.Topics, newLeader)
		}
		return nil
	})
	e.check(t, client, "transactions", func(ctx context.Context) error { return franzTxn(ctx, seeds) })
	runFranzSecurity(t, e)
}
