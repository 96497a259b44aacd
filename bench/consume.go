package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeResult is what the consume phase measured.
type consumeResult struct {
	expected   int64 // records in the topic (end offset - start offset)
	records    int64
	bytes      int64
	duplicates int64 // records at or below an offset already seen
	elapsed    time.Duration
	first      time.Duration // client creation to the first record
}

// topicRecords returns the number of records in each partition of topic.
func topicRecords(ctx context.Context, seeds []string, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	n := make(map[int32]int64)
	var ferr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			ferr = fmt.Errorf("end offset of %s/%d: %w", e.Topic, e.Partition, e.Err)
			return
		}
		s, ok := starts.Lookup(e.Topic, e.Partition)
		if !ok || s.Err != nil {
			ferr = fmt.Errorf("no start offset of %s/%d", e.Topic, e.Partition)
			return
		}
		n[e.Partition] = e.Offset - s.Offset
	})
	return n, ferr
}

// consume reads every partition of topic from the start until it has
// want[p] records of each partition p.
func consume(ctx context.Context, seeds []string, topic string, want map[int32]int64, ctr *counters) (consumeResult, error) {
	var res consumeResult
	offsets := make(map[int32]kgo.Offset, len(want))
	for p, n := range want {
		res.expected += n
		offsets[p] = kgo.NewOffset().AtStart()
	}
	start := time.Now()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
	)
	if err != nil {
		return res, fmt.Errorf("consumer client: %w", err)
	}
	defer cl.Close()
	got := make(map[int32]int64, len(want))
	next := make(map[int32]int64, len(want))
	remaining := 0
	for _, n := range want {
		if n > 0 {
			remaining++
		}
	}
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("consume %s (%d of %d records): %w", topic, res.records, res.expected, err)
		}
		for _, fe := range fs.Errors() {
			return res, fmt.Errorf("consume %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		if res.first == 0 && !fs.Empty() {
			res.first = time.Since(start)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next[r.Partition] {
				res.duplicates++
				return
			}
			next[r.Partition] = r.Offset + 1
			res.records++
			res.bytes += int64(len(r.Value))
			ctr.records.Add(1)
			ctr.bytes.Add(int64(len(r.Value)))
			got[r.Partition]++
			if got[r.Partition] == want[r.Partition] {
				remaining--
			}
		})
	}
	res.elapsed = time.Since(start)
	return res, nil
}
