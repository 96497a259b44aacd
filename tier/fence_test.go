package tier

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"strata/index"
)

// unconditional is a store that takes every PutIf as a plain Put, as an
// S3-compatible server without conditional writes does.
type unconditional struct{ *MemStore }

func (u unconditional) PutIf(ctx context.Context, key string, r io.Reader, size int64, _ Cond) (string, error) {
	return "\"x\"", u.MemStore.Put(ctx, key, r, size)
}

func TestProbeConditionalWrites(t *testing.T) {
	ctx := context.Background()
	s3, _ := newMinIOStore(t, nil)
	for name, s := range map[string]ObjectStore{"mem": NewMemStore(), "minio": s3} {
		if err := ProbeConditionalWrites(ctx, s); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	mem := NewMemStore()
	if err := ProbeConditionalWrites(ctx, unconditional{mem}); !errors.Is(err, ErrNoConditionalWrites) {
		t.Fatalf("a store that ignores conditions: %v, want ErrNoConditionalWrites", err)
	}
	if keys := mem.Keys(); len(keys) != 0 {
		t.Fatalf("the probe left %v", keys)
	}
	if err := ProbeConditionalWrites(ctx, refusing{NewMemStore()}); !errors.Is(err, ErrConditionalWritesRefused) {
		t.Fatalf("a store that refuses conditions: %v, want ErrConditionalWritesRefused", err)
	}
}

// refusing is a store that answers every PutIf with an error, as a server
// that does not implement the headers does.
type refusing struct{ *MemStore }

func (refusing) PutIf(context.Context, string, io.Reader, int64, Cond) (string, error) {
	return "", errors.New("501 NotImplemented: A header you provided implies functionality that is not implemented")
}

// Regression (issue 22 review): an object larger than any manifest at a
// segment's manifest key made every cleanup pass fail (the fence's read
// failed), so the partition never uploaded again. It is an unusable
// manifest, which the fence replaces.
func TestFenceOverAnOversizedManifest(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore()
	m := index.SegmentMetadata{
		Partition: upTP, SegmentID: index.NewUUID(), StartOffset: 0, EndOffset: 9, MaxTimestamp: -1, BrokerID: 2,
		LeaderEpochs: []index.EpochEntry{{Epoch: 1, StartOffset: 0}}, State: index.CopySegmentStarted,
	}
	big := make([]byte, index.MaxManifestSize+1)
	if err := store.Put(ctx, ManifestKey(&m), bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	if err := markDeleting(ctx, store, &m, true); err != nil {
		t.Fatalf("markDeleting over an oversized manifest: %v", err)
	}
	got, err := readManifest(ctx, store, ManifestKey(&m))
	if err != nil || got.State != index.DeleteSegmentStarted {
		t.Fatalf("manifest after the fence: %v, %v", got.State, err)
	}
}
