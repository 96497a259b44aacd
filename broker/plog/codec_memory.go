package plog

// What decompressing a producer's batches takes, read from their headers
// before anything is decompressed, so that the network layer can count it
// in queued.max.request.bytes with the request (the broker's
// decodeCharge). Append decompresses a request's batches one at a time,
// as streams (codec.go), so a request holds at most the largest of them.

import (
	"encoding/binary"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Memory a stream holds beside its codec's window: the records read
// buffer (recBufPool), and for zstd the block decoder's buffers and the
// ring's two blocks of room (about four blocks, a block being at most
// the window and 128 KiB).
const (
	walkBufferMemory = 32 << 10
	gzipMemory       = 96 << 10 // flate's 32 KiB window, its tables and the reader's buffer
	zstdMaxBlock     = 128 << 10
	lz4UnknownMemory = 8 << 20  // two 4 MiB blocks, the largest lz4 frames have
	zstdMinWindow    = 64 << 10 // the window every frame of a batch may have, whatever its first declares
)

// DecompressMemory returns the most memory that decompressing one of the
// record batches in records (a producer's, unchecked) takes at once:
// zstd's window (the first frame's, which every frame of the batch is
// held to, at least 64 KiB; at most the largest any topic allows), lz4's
// blocks, the decoded blocks of snappy, flate's window for gzip, plus
// the stream's read buffer. Uncompressed batches take nothing. It reads
// only headers, never decompresses, and never fails: what it cannot read
// costs what the log will spend refusing it.
func DecompressMemory(records []byte) int64 {
	var most int64
	for len(records) >= batchHeaderSize {
		n := int64(int32(binary.BigEndian.Uint32(records[8:]))) + logOverhead
		if n < batchHeaderSize || n > int64(len(records)) {
			n = int64(len(records))
		}
		codec := int(binary.BigEndian.Uint16(records[offAttributes:]) & attrCompressionMask)
		most = max(most, streamMemory(records[batchHeaderSize:n], codec))
		records = records[n:]
	}
	return most
}

// streamMemory is what openRecords takes to decompress data with codec.
func streamMemory(data []byte, codec int) int64 {
	switch codec {
	case codecGzip:
		return walkBufferMemory + gzipMemory
	case codecSnappy:
		return walkBufferMemory + snappyMemory(data)
	case codecLz4:
		return walkBufferMemory + lz4Memory(data)
	case codecZstd:
		w := uint64(zstdMinWindow)
		var h zstd.Header
		if h.Decode(data) == nil {
			w = zstdDecoderWindow(&h, maxDecompressedBatch)
		}
		return walkBufferMemory + int64(w) + 4*int64(min(w, zstdMaxBlock))
	}
	return 0
}

// zstdDecoderWindow is the window the decoder of a batch whose first
// frame has header h, and that may decompress to limit bytes, allows
// every frame of the batch: the first frame's, at least zstdMinWindow,
// at most zstdWindowLimit(limit).
func zstdDecoderWindow(h *zstd.Header, limit int) uint64 {
	return min(max(zstdFrameWindow(h), zstdMinWindow), uint64(zstdWindowLimit(limit)))
}

// snappyMemory: a plain block is decoded whole; xerial framing decodes
// one block at a time.
func snappyMemory(data []byte) int64 {
	if len(data) < len(xerialHeader) || string(data[:8]) != string(xerialHeader[:8]) {
		n, err := s2.DecodedLen(data)
		if err != nil {
			return 0
		}
		return int64(min(n, 22*len(data)+16))
	}
	var most int64
	for rest := data[len(xerialHeader):]; len(rest) >= 4; {
		n := int64(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if n > int64(len(rest)) {
			break
		}
		if d, err := s2.DecodedLen(rest[:n]); err == nil {
			most = max(most, int64(min(d, 22*int(n)+16)))
		}
		rest = rest[n:]
	}
	return most
}

// lz4Memory is two blocks of the frame's block maximum size (the frame
// descriptor's BD byte), as pierrec/lz4's reader holds.
func lz4Memory(data []byte) int64 {
	if len(data) < 6 || binary.LittleEndian.Uint32(data) != 0x184D2204 {
		return lz4UnknownMemory
	}
	switch (data[5] >> 4) & 7 {
	case 4:
		return 2 * 64 << 10
	case 5:
		return 2 * 256 << 10
	case 6:
		return 2 * 1 << 20
	}
	return lz4UnknownMemory
}
