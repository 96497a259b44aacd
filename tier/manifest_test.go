package tier

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"strata/index"
)

var (
	topicX = index.UUID{0xfb, 0xff, 3, 4, 5, 6, 0x40, 8, 0x80, 10, 11, 12, 13, 14, 15, 16}
	topicY = index.UUID{9, 9, 9, 9, 9, 9, 0x40, 9, 0x80, 9, 9, 9, 9, 9, 9, 1}
)

func TestLayoutKeys(t *testing.T) {
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 12}
	m := &index.SegmentMetadata{Partition: tp, SegmentID: topicY, StartOffset: 42}
	if got := TopicPrefix(topicX); got != "-_8DBAUGQAiACgsMDQ4PEA/" {
		t.Fatalf("TopicPrefix = %s", got)
	}
	want := "-_8DBAUGQAiACgsMDQ4PEA/12/00000000000000000042-CQkJCQkJQAmACQkJCQkJAQ"
	if got := ObjectKey(m, index.ObjectLog); got != want+".log" {
		t.Fatalf("ObjectKey = %s", got)
	}
	if got := ManifestKey(m); got != want+".manifest" {
		t.Fatalf("ManifestKey = %s", got)
	}
	for kind := index.ObjectKind(0); kind.Valid(); kind++ {
		key := ObjectKey(m, kind)
		if err := ValidateKey(key); err != nil {
			t.Errorf("%s: %v", key, err)
		}
		k, err := ParseSegmentKey(key)
		if err != nil || k.Partition != tp || k.BaseOffset != 42 || k.SegmentID != topicY || k.Suffix != kind.Suffix() {
			t.Errorf("ParseSegmentKey(%s) = %+v, %v", key, k, err)
		}
		if !strings.HasPrefix(key, PartitionPrefix(tp)) || !strings.HasPrefix(key, TopicPrefix(topicX)) {
			t.Errorf("%s outside its prefixes", key)
		}
	}
	for _, bad := range []string{
		"x", want, "AAAAAAAAAAAAAAAAAAAAAA/12/00000000000000000042-CQkJCQkJQAmACQkJCQkJAQ.log",
		"-_8DBAUGQAiACgsMDQ4PEA/012/00000000000000000042-CQkJCQkJQAmACQkJCQkJAQ.log",
		"-_8DBAUGQAiACgsMDQ4PEA/-1/00000000000000000042-CQkJCQkJQAmACQkJCQkJAQ.log",
		"-_8DBAUGQAiACgsMDQ4PEA/12/0000000000000000004x-CQkJCQkJQAmACQkJCQkJAQ.log",
		"-_8DBAUGQAiACgsMDQ4PEA/12/00000000000000000042_CQkJCQkJQAmACQkJCQkJAQ.log",
		"-_8DBAUGQAiACgsMDQ4PEA/12/a/00000000000000000042-CQkJCQkJQAmACQkJCQkJAQ.log",
	} {
		if _, err := ParseSegmentKey(bad); err == nil {
			t.Errorf("ParseSegmentKey(%q) accepted", bad)
		}
	}
}

// uploaded writes a segment's objects and manifest the way an uploader
// will, and returns its metadata.
func uploaded(t *testing.T, s ObjectStore, tp index.TopicIDPartition, start, end int64, state index.State, eventTS int64) index.SegmentMetadata {
	t.Helper()
	m := index.SegmentMetadata{
		Partition: tp, SegmentID: index.NewUUID(), Topic: "orders",
		StartOffset: start, EndOffset: end, MaxTimestamp: 1000 + end, EventTimestamp: eventTS, BrokerID: 1,
		SegmentSize: 10, LeaderEpochs: []index.EpochEntry{{Epoch: 1, StartOffset: start}}, State: state,
		Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: 10}},
	}
	put(t, s, ObjectKey(&m, index.ObjectLog), bytes.Repeat([]byte{1}, 10))
	b, err := index.EncodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, ManifestKey(&m), b)
	return m
}

// TestRefreshFromManifests: RefreshPartition makes a partition of the
// index hold what the bucket's manifests of it say, on the in-memory
// store and on MinIO: two manifests at one base are both kept and the
// finished one is read, a corrupt manifest and one at another segment's
// key are skipped, and what the bucket does not hold (any more) is
// dropped.
func TestRefreshFromManifests(t *testing.T) {
	stores := map[string]func(t *testing.T) ObjectStore{
		"mem": func(t *testing.T) ObjectStore { return NewMemStore() },
		"s3": func(t *testing.T) ObjectStore {
			s, _ := newMinIOStore(t, nil)
			return s
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) { testRefreshFromManifests(t, newStore(t)) })
	}
}

func testRefreshFromManifests(t *testing.T, s ObjectStore) {
	ctx := ctxT(t)
	x0 := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	x1 := index.TopicIDPartition{TopicID: topicX, Partition: 1}
	y0 := index.TopicIDPartition{TopicID: topicY, Partition: 0}
	stale := index.TopicIDPartition{TopicID: topicY, Partition: 5}

	a := uploaded(t, s, x0, 0, 99, index.CopySegmentFinished, 10)
	b := uploaded(t, s, x0, 100, 199, index.CopySegmentFinished, 10)
	// A retried upload of base 100 that never finished: kept beside b,
	// which serves its offsets.
	retry := uploaded(t, s, x0, 100, 199, index.CopySegmentStarted, 20)
	c := uploaded(t, s, x0, 200, 299, index.DeleteSegmentStarted, 30)
	d := uploaded(t, s, x1, 0, 9, index.CopySegmentStarted, 40)
	e := uploaded(t, s, y0, 5, 50, index.CopySegmentFinished, 50)
	// A corrupt manifest of x0 and one of y0 at another segment's key.
	put(t, s, "-_8DBAUGQAiACgsMDQ4PEA/0/00000000000000000300-CQkJCQkJQAmACQkJCQkJAQ.manifest", []byte("SRSM garbage"))
	moved, _ := index.EncodeManifest(&e)
	put(t, s, ManifestKey(&index.SegmentMetadata{Partition: y0, StartOffset: 999, SegmentID: e.SegmentID}), moved)

	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	// Something the bucket does not know, to be dropped.
	old := index.SegmentMetadata{Partition: stale, SegmentID: index.NewUUID(), StartOffset: 0, EndOffset: 1,
		MaxTimestamp: -1, LeaderEpochs: []index.EpochEntry{{Epoch: 0, StartOffset: 0}}}
	if err := idx.AddSegment(old); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		tp                  index.TopicIDPartition
		manifests, segments int
	}{{x0, 5, 4}, {x1, 1, 1}, {y0, 2, 1}, {stale, 0, 0}} {
		st, err := RefreshPartition(ctx, s, idx, c.tp)
		if err != nil {
			t.Fatal(err)
		}
		if st.Manifests != c.manifests || st.Segments != c.segments || !st.Changed {
			t.Errorf("refresh %s: %+v; want %d manifests, %d segments, changed", c.tp, st, c.manifests, c.segments)
		}
	}
	for tp, want := range map[index.TopicIDPartition][]index.SegmentMetadata{
		x0: slices.SortedFunc(slices.Values([]index.SegmentMetadata{a, b, retry, c}), compareSegments), x1: {d}, y0: {e}, stale: nil,
	} {
		got, err := idx.Segments(tp)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s after refresh:\n got %+v\nwant %+v", tp, got, want)
		}
	}
	if got, err := idx.SegmentForOffset(x0, 150); err != nil || got.SegmentID != b.SegmentID {
		t.Errorf("offset 150 after refresh: %+v, %v", got, err)
	}
	if end, ok, _ := idx.LogEnd(x0); !ok || end != 199 {
		t.Errorf("LogEnd after refresh: %d %v", end, ok)
	}

	// One partition: a new manifest appears, others stay as they are.
	f := uploaded(t, s, x1, 10, 19, index.CopySegmentFinished, 60)
	if err := s.Delete(ctx, ManifestKey(&e)); err != nil {
		t.Fatal(err)
	}
	if _, err := RefreshPartition(ctx, s, idx, x1); err != nil {
		t.Fatal(err)
	}
	if got, _ := idx.Segments(x1); !reflect.DeepEqual(got, []index.SegmentMetadata{d, f}) {
		t.Errorf("x1 after its refresh: %+v", got)
	}
	if got, _ := idx.Segments(y0); !reflect.DeepEqual(got, []index.SegmentMetadata{e}) {
		t.Errorf("y0 changed by a refresh of x1: %+v", got)
	}
	// y0's own refresh empties it: its manifest is gone.
	if _, err := RefreshPartition(ctx, s, idx, y0); err != nil {
		t.Fatal(err)
	}
	if got, _ := idx.Segments(y0); len(got) != 0 {
		t.Errorf("y0 after its manifest went: %+v", got)
	}
}
