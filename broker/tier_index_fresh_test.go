package broker

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/tier"
)

// getLog records the keys a store is asked for.
type getLog struct {
	tier.ObjectStore
	mu   sync.Mutex
	keys []string
}

func (g *getLog) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.mu.Unlock()
	return g.ObjectStore.Get(ctx, key, off, length)
}

func (g *getLog) count(prefix string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, k := range g.keys {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// TestNewIndexReadsOnlyHostedPartitions: a broker with a new data
// directory on a bucket that holds other partitions' history builds its
// remote index from its own partitions' manifests only, so that what a
// fresh broker does before it serves does not grow with the bucket.
func TestNewIndexReadsOnlyHostedPartitions(t *testing.T) {
	store := tier.NewMemStore()
	_, _, other := tieredBroker(t, store, "tiered-elsewhere", 1, 1200)
	gets := &getLog{ObjectStore: store}
	ts, p, tp := tieredBroker(t, gets, "tiered-here", 1, 600)
	waitFor(t, "the partition's index refreshed", 30*time.Second, func() bool {
		return ts.tier.IndexFresh(tierPart{p})
	})
	if n := gets.count(tier.PartitionPrefix(other)); n != 0 {
		t.Fatalf("the new broker read %d objects of a partition it does not host", n)
	}
	if segs, err := ts.tier.idx.Segments(other); err != nil || len(segs) != 0 {
		t.Fatalf("the new broker's index holds %d segments of a partition it does not host (%v)", len(segs), err)
	}
	if segs, err := ts.tier.idx.Segments(tp); err != nil || len(segs) == 0 {
		t.Fatalf("the new broker's index holds no segment of its own partition (%v)", err)
	}
}
