package tier

import (
	"context"
	"errors"
	"io"
	"testing"
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
}
