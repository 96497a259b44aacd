package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The manifest object format; see the package doc.
const (
	manifestMagic = "SRSM" // Strata Remote Segment Manifest
	// ManifestVersion is the newest version written: 3 when a segment has
	// packed objects (version 2 and the upload's leader epoch), 1 (a
	// subset) otherwise; version 2 is still read.
	ManifestVersion = 3
	manifestHeader  = 4 + 2 + 4 // magic, version, crc
	// MaxManifestSize bounds what DecodeManifest accepts (and what a reader
	// needs to fetch): far above any real manifest.
	MaxManifestSize = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Manifest decoding errors; DecodeManifest wraps one of them (or
// ErrInvalidMetadata) in every error it returns.
var (
	ErrManifestCorrupt = errors.New("corrupt remote segment manifest")
	ErrManifestVersion = errors.New("unsupported remote segment manifest version")
)

// EncodeManifest returns the manifest object for m. It fails only when m
// does not Validate.
func EncodeManifest(m *SegmentMetadata) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var own, packed []ObjectEntry
	for _, o := range m.Objects {
		if o.Packed {
			packed = append(packed, o)
		} else {
			own = append(own, o)
		}
	}
	if len(own) > 255 || len(packed) > 255 {
		return nil, fmt.Errorf("%w: %d objects", ErrInvalidMetadata, len(m.Objects))
	}
	version := uint16(1)
	if len(packed) > 0 {
		version = 3
	}
	n := manifestHeader + 16 + 4 + 16 + 1 + 8*4 + 4 + 8 + 2 + len(m.Topic) + 4 + 12*len(m.LeaderEpochs) + 1 + 9*len(own) + 1 + 17*len(packed) + 4
	b := make([]byte, 0, n)
	b = append(b, manifestMagic...)
	b = binary.BigEndian.AppendUint16(b, version)
	b = append(b, 0, 0, 0, 0) // crc, below
	b = append(b, m.Partition.TopicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(m.Partition.Partition))
	b = append(b, m.SegmentID[:]...)
	b = append(b, byte(m.State))
	for _, v := range []int64{m.StartOffset, m.EndOffset, m.MaxTimestamp, m.EventTimestamp} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(m.BrokerID))
	b = binary.BigEndian.AppendUint64(b, uint64(m.SegmentSize))
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Topic)))
	b = append(b, m.Topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.LeaderEpochs)))
	for _, e := range m.LeaderEpochs {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	b = append(b, byte(len(own)))
	for _, o := range own {
		b = append(b, byte(o.Kind))
		b = binary.BigEndian.AppendUint64(b, uint64(o.Size))
	}
	if version >= 2 {
		b = append(b, byte(len(packed)))
		for _, o := range packed {
			b = append(b, byte(o.Kind))
			b = binary.BigEndian.AppendUint64(b, uint64(o.Offset))
			b = binary.BigEndian.AppendUint64(b, uint64(o.Size))
		}
		b = binary.BigEndian.AppendUint32(b, uint32(m.UploadEpoch))
	}
	binary.BigEndian.PutUint32(b[6:10], crc32.Checksum(b[manifestHeader:], castagnoli))
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("%w: manifest of %d bytes", ErrInvalidMetadata, len(b))
	}
	return b, nil
}

// DecodeManifest parses and validates a manifest object. Bad input gets an
// error wrapping ErrManifestCorrupt, ErrManifestVersion or
// ErrInvalidMetadata; it never panics.
func DecodeManifest(b []byte) (SegmentMetadata, error) {
	var m SegmentMetadata
	if len(b) > MaxManifestSize {
		return m, fmt.Errorf("%w: %d bytes, more than %d", ErrManifestCorrupt, len(b), MaxManifestSize)
	}
	if len(b) < manifestHeader || string(b[:4]) != manifestMagic {
		return m, fmt.Errorf("%w: no manifest magic", ErrManifestCorrupt)
	}
	version := binary.BigEndian.Uint16(b[4:6])
	if version < 1 || version > ManifestVersion {
		return m, fmt.Errorf("%w: version %d, this broker reads 1 to %d", ErrManifestVersion, version, ManifestVersion)
	}
	if want, got := binary.BigEndian.Uint32(b[6:10]), crc32.Checksum(b[manifestHeader:], castagnoli); want != got {
		return m, fmt.Errorf("%w: crc %08x, computed %08x", ErrManifestCorrupt, want, got)
	}
	d := decoder{b: b[manifestHeader:]}
	d.bytes(m.Partition.TopicID[:])
	m.Partition.Partition = int32(d.u32())
	d.bytes(m.SegmentID[:])
	m.State = State(d.u8())
	m.StartOffset = int64(d.u64())
	m.EndOffset = int64(d.u64())
	m.MaxTimestamp = int64(d.u64())
	m.EventTimestamp = int64(d.u64())
	m.BrokerID = int32(d.u32())
	m.SegmentSize = int64(d.u64())
	if n := int(d.u16()); d.need(int64(n)) {
		m.Topic = string(d.b[:n])
		d.b = d.b[n:]
	}
	if n := int64(d.u32()); d.need(n * 12) {
		m.LeaderEpochs = make([]EpochEntry, n)
		for i := range m.LeaderEpochs {
			m.LeaderEpochs[i] = EpochEntry{Epoch: int32(d.u32()), StartOffset: int64(d.u64())}
		}
	}
	if n := int64(d.u8()); d.need(n * 9) {
		m.Objects = make([]ObjectEntry, n)
		for i := range m.Objects {
			m.Objects[i] = ObjectEntry{Kind: ObjectKind(d.u8()), Size: int64(d.u64())}
		}
	}
	if version >= 2 {
		// Versions 2 and 3 are written only for packed objects: never none.
		n := int64(d.u8())
		if n == 0 && !d.short {
			return SegmentMetadata{}, fmt.Errorf("%w: version %d without packed objects", ErrManifestCorrupt, version)
		}
		if d.need(n * 17) {
			for range n {
				o := ObjectEntry{Kind: ObjectKind(d.u8()), Packed: true}
				o.Offset, o.Size = int64(d.u64()), int64(d.u64())
				m.Objects = append(m.Objects, o)
			}
		}
	}
	if version >= 3 {
		m.UploadEpoch = int32(d.u32())
	}
	if d.short {
		return SegmentMetadata{}, fmt.Errorf("%w: truncated", ErrManifestCorrupt)
	}
	if len(d.b) != 0 {
		return SegmentMetadata{}, fmt.Errorf("%w: %d bytes after the last field", ErrManifestCorrupt, len(d.b))
	}
	if err := m.Validate(); err != nil {
		return SegmentMetadata{}, err
	}
	return m, nil
}

// decoder reads big-endian fields; once short, every read yields zero.
type decoder struct {
	b     []byte
	short bool
}

func (d *decoder) need(n int64) bool {
	if d.short || n < 0 || int64(len(d.b)) < n {
		d.short = true
		return false
	}
	return true
}

func (d *decoder) bytes(dst []byte) {
	if d.need(int64(len(dst))) {
		copy(dst, d.b)
		d.b = d.b[len(dst):]
	}
}

func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u16() uint16 {
	if !d.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}
