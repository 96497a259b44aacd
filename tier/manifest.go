package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"strata/index"
)

// Reading manifests from the bucket (RefreshPartition, FindSegment).

var errBadManifest = errors.New("unusable manifest")

// readManifest fetches and decodes one manifest and checks that its key
// agrees with it. An unusable manifest (corrupt, of an unknown version,
// or at the wrong key) is errBadManifest; one deleted since the listing
// ErrNotFound; anything else a failure to read it.
func readManifest(ctx context.Context, store ObjectStore, key string) (index.SegmentMetadata, error) {
	k, err := ParseSegmentKey(key)
	if err != nil {
		return index.SegmentMetadata{}, fmt.Errorf("%w: %v", errBadManifest, err)
	}
	r, err := store.Get(ctx, key, 0, index.MaxManifestSize+1)
	if err != nil {
		return index.SegmentMetadata{}, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		return index.SegmentMetadata{}, fmt.Errorf("read %s: %w", key, err)
	}
	m, err := index.DecodeManifest(buf.Bytes())
	if err != nil {
		return m, fmt.Errorf("%w: %s: %v", errBadManifest, key, err)
	}
	if m.Partition != k.Partition || m.StartOffset != k.BaseOffset || m.SegmentID != k.SegmentID {
		return m, fmt.Errorf("%w: %s holds the manifest of segment %s of %s at %d", errBadManifest, key, m.SegmentID, m.Partition, m.StartOffset)
	}
	return m, nil
}
