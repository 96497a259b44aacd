package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"slices"
	"testing"
)

func sampleManifest() SegmentMetadata {
	m := seg(tpA1, 1000, 1999, 1700000000123, EpochEntry{3, 1000}, EpochEntry{5, 1500})
	m.SegmentID = UUID{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x40, 1, 0x80, 2, 3, 4, 5, 6, 7, 8}
	m.State = CopySegmentFinished
	m.Objects = append(m.Objects, ObjectEntry{Kind: ObjectLeaderEpochCheckpoint, Size: 30}, ObjectEntry{Kind: ObjectProducerSnapshot, Size: 0})
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []SegmentMetadata{sampleManifest(), seg(tpA0, 0, 0, -1)} {
		b, err := EncodeManifest(&m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
	m := sampleManifest()
	m.Objects, m.Topic = nil, ""
	b, _ := EncodeManifest(&m)
	if got, _ := DecodeManifest(b); got.Objects != nil && len(got.Objects) != 0 || got.Topic != "" {
		t.Fatalf("empty lists: %+v", got)
	}
}

// TestManifestLayout pins the v1 byte layout written in doc.go.
func TestManifestLayout(t *testing.T) {
	m := sampleManifest()
	b, err := EncodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	if string(b[0:4]) != "SRSM" || be.Uint16(b[4:6]) != 1 {
		t.Fatalf("header % x", b[:6])
	}
	p := b[10:]
	if !bytes.Equal(p[0:16], topicA[:]) || be.Uint32(p[16:20]) != 1 || !bytes.Equal(p[20:36], m.SegmentID[:]) || p[36] != 1 {
		t.Fatalf("ids and state: % x", p[:37])
	}
	if be.Uint64(p[37:]) != 1000 || be.Uint64(p[45:]) != 1999 || be.Uint64(p[53:]) != 1700000000123 ||
		be.Uint64(p[61:]) != 1000 || be.Uint32(p[69:]) != 1 || be.Uint64(p[73:]) != 4096 {
		t.Fatalf("offsets, timestamps, broker, size: % x", p[37:81])
	}
	if be.Uint16(p[81:]) != 6 || string(p[83:89]) != "orders" {
		t.Fatalf("topic: % x", p[81:89])
	}
	if be.Uint32(p[89:]) != 2 || be.Uint32(p[93:]) != 3 || be.Uint64(p[97:]) != 1000 || be.Uint32(p[105:]) != 5 || be.Uint64(p[109:]) != 1500 {
		t.Fatalf("epochs: % x", p[89:117])
	}
	if p[117] != 5 || p[118] != 0 || be.Uint64(p[119:]) != 4096 || len(p) != 118+5*9 {
		t.Fatalf("objects: % x (len %d)", p[117:], len(p))
	}
}

// packedManifest is sampleManifest with its small objects packed in an
// .indexes object, as the uploader writes them (version 2).
func packedManifest() SegmentMetadata {
	m := sampleManifest()
	m.Objects = []ObjectEntry{{Kind: ObjectLog, Size: m.SegmentSize}, {Kind: ObjectIndexes, Size: 110},
		{Kind: ObjectOffsetIndex, Size: 80, Packed: true}, {Kind: ObjectLeaderEpochCheckpoint, Size: 30, Packed: true, Offset: 80},
		{Kind: ObjectProducerSnapshot, Size: 0, Packed: true, Offset: 110}}
	return m
}

func TestManifestPacked(t *testing.T) {
	m := packedManifest()
	b, err := EncodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != 3 {
		t.Fatalf("version %d for packed objects, want 3", v)
	}
	got, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// The upload epoch is the last field of version 3; a version 2
	// manifest (the same without it) still reads, with epoch 0.
	m.UploadEpoch = 7
	b3, err := EncodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeManifest(b3); err != nil || got.UploadEpoch != 7 {
		t.Fatalf("upload epoch round trip: %v %d", err, got.UploadEpoch)
	}
	b2 := bytes.Clone(b3[:len(b3)-4])
	binary.BigEndian.PutUint16(b2[4:], 2)
	binary.BigEndian.PutUint32(b2[6:10], crc32.Checksum(b2[manifestHeader:], castagnoli))
	if got, err := DecodeManifest(b2); err != nil || got.UploadEpoch != 0 || got.SegmentID != m.SegmentID {
		t.Fatalf("version 2 manifest: %v %+v", err, got)
	}
	// Without packed objects the manifest stays version 1.
	plain := sampleManifest()
	if b1, _ := EncodeManifest(&plain); binary.BigEndian.Uint16(b1[4:]) != 1 {
		t.Fatal("a manifest without packed objects is not version 1")
	}
	for _, c := range []struct {
		name string
		f    func(m *SegmentMetadata)
	}{
		{"past the .indexes object", func(m *SegmentMetadata) { m.Objects[3].Offset = 81 }},
		{"negative offset", func(m *SegmentMetadata) { m.Objects[2].Offset = -1 }},
		{"no .indexes object", func(m *SegmentMetadata) { m.Objects = slices.Delete(m.Objects, 1, 2) }},
		{"the .log packed", func(m *SegmentMetadata) { m.Objects[0].Packed = true }},
		{"an offset without packing", func(m *SegmentMetadata) { m.Objects[1].Offset = 4 }},
	} {
		bad := packedManifest()
		c.f(&bad)
		if _, err := EncodeManifest(&bad); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("%s: %v, want ErrInvalidMetadata", c.name, err)
		}
	}
	// Version 2 with an empty packed list is a second encoding of a
	// version 1 manifest: refused, as is a version 1 body labelled 2.
	plainB, _ := EncodeManifest(&plain)
	for name, v2 := range map[string][]byte{"empty packed list": append(bytes.Clone(plainB), 0), "version 1 body": bytes.Clone(plainB)} {
		v2[5] = 2
		binary.BigEndian.PutUint32(v2[6:10], crc(v2[10:]))
		if _, err := DecodeManifest(v2); !errors.Is(err, ErrManifestCorrupt) {
			t.Errorf("%s: %v, want ErrManifestCorrupt", name, err)
		}
	}
}

func TestDecodeManifestRejects(t *testing.T) {
	m := sampleManifest()
	good, _ := EncodeManifest(&m)
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// recrc fixes the checksum so that the checks behind it are reached.
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[6:10], crc(b[10:]))
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrManifestCorrupt},
		{"short header", good[:9], ErrManifestCorrupt},
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrManifestCorrupt},
		{"version 4", mutate(func(b []byte) []byte { b[5] = 4; return b }), ErrManifestVersion},
		{"flipped bit", mutate(func(b []byte) []byte { b[40] ^= 1; return b }), ErrManifestCorrupt},
		{"truncated", good[:len(good)-1], ErrManifestCorrupt},
		{"truncated, crc fixed", mutate(func(b []byte) []byte { return recrc(b[:len(b)-1]) }), ErrManifestCorrupt},
		{"trailing byte", mutate(func(b []byte) []byte { return recrc(append(b, 0)) }), ErrManifestCorrupt},
		{"huge epoch count", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[10+89:], 1<<31); return recrc(b) }), ErrManifestCorrupt},
		{"unknown state", mutate(func(b []byte) []byte { b[10+36] = 7; return recrc(b) }), ErrInvalidMetadata},
		{"end before start", mutate(func(b []byte) []byte { binary.BigEndian.PutUint64(b[10+45:], 1); return recrc(b) }), ErrInvalidMetadata},
		{"too large", make([]byte, MaxManifestSize+1), ErrManifestCorrupt},
	} {
		if _, err := DecodeManifest(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func crc(b []byte) uint32 {
	// The same CRC-32C the format uses, computed independently of the
	// encoder's table.
	var table [256]uint32
	for i := range table {
		c := uint32(i)
		for range 8 {
			if c&1 == 1 {
				c = c>>1 ^ 0x82f63b78
			} else {
				c >>= 1
			}
		}
		table[i] = c
	}
	c := ^uint32(0)
	for _, x := range b {
		c = table[byte(c)^x] ^ c>>8
	}
	return ^c
}

// FuzzDecodeManifest: decoding never panics, and whatever decodes
// re-encodes to the same bytes (the format has one encoding per value).
func FuzzDecodeManifest(f *testing.F) {
	m := sampleManifest()
	good, _ := EncodeManifest(&m)
	f.Add(good)
	pm := packedManifest()
	packed, _ := EncodeManifest(&pm)
	f.Add(packed)
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			if !errors.Is(err, ErrManifestCorrupt) && !errors.Is(err, ErrManifestVersion) && !errors.Is(err, ErrInvalidMetadata) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		again, err := EncodeManifest(&m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n% x\n% x", b, again)
		}
	})
}
