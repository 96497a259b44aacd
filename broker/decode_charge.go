package broker

// What decoding a request may take, reserved from queued.max.request.bytes
// before kmsg decodes it (network.Conn.ReserveDecode; the network layer
// holds the memory pool, the broker knows the APIs).

import (
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
)

// decodeFactor bounds the heap a request other than Produce takes once
// decoded by kmsg, per byte of its frame. kmsg checks each claimed array
// length against the bytes left times the element's smallest encoding
// before it allocates, so no frame makes it allocate more than the frame
// could hold; but an element of a few bytes decodes into a struct of tens
// of bytes, and a tagged-field section of three bytes into a map of
// hundreds. The worst frames found by TestDecodeAmplification take about
// 108 bytes of heap per byte (Metadata v9: topics of an empty name and one
// empty tag each).
const decodeFactor = 160

// decodeCharge is the memory a request body may take once decoded, beyond
// the frame itself: for Produce, counted from its topics, partitions and
// tagged fields (records stay in the frame), plus what decompressing its
// largest compressed batch holds while the log validates it
// (plog.DecompressMemory: the batches are validated one at a time, as
// streams); for other requests, decodeFactor times the body.
func decodeCharge(key, version int16, body []byte) int64 {
	if key == 0 {
		if n, ok := produceDecodeCost(body, version); ok {
			return n
		}
	}
	return decodeFactor * int64(len(body))
}

// Heap taken by decoded Produce parts (see produceDecodeCost).
const (
	produceTopicSize     = int64(unsafe.Sizeof(kmsg.ProduceRequestTopic{}))
	producePartitionSize = int64(unsafe.Sizeof(kmsg.ProduceRequestTopicPartition{}))
	tagSectionCost       = 512 // the map of a tagged-field section with entries
	tagEntryCost         = 96  // and each entry
	stringCost           = 16  // a string's allocation, beyond its bytes
)

// produceDecodeCost walks a Produce body (after the request header) as
// kmsg decodes it and returns the heap decoding takes: the topic and
// partition arrays, topic names and transactional id, and a map for each
// tagged-field section that has entries. Records are slices of the frame;
// decompressing them is charged as the most any one batch of the request
// holds (a zstd window, lz4 blocks, ...), read from their headers.
// ok is false for a body kmsg would not decode (the generic charge
// applies).
func produceDecodeCost(body []byte, version int16) (int64, bool) {
	r := wireReader{b: body, flexible: version >= 9}
	cost := int64(unsafe.Sizeof(kmsg.ProduceRequest{}))
	var decompress int64
	if version >= 3 {
		if n := r.stringLen(); n >= 0 {
			r.skip(n)
			cost += n + stringCost
		}
	}
	r.skip(2 + 4) // acks, timeout
	topics := r.arrayLen()
	cost += allocCost(max(topics, 0) * produceTopicSize)
	for range topics {
		if r.bad {
			break
		}
		if version <= 12 {
			n := max(r.stringLen(), 0)
			r.skip(n)
			cost += n + stringCost
		} else {
			r.skip(16) // topic id
		}
		parts := r.arrayLen()
		cost += allocCost(max(parts, 0) * producePartitionSize)
		for range parts {
			if r.bad {
				break
			}
			r.skip(4) // partition
			n := max(r.bytesLen(), 0)
			if !r.bad && n <= int64(len(r.b)) {
				decompress = max(decompress, plog.DecompressMemory(r.b[:n]))
			}
			r.skip(n) // records: slices of the frame
			cost += r.tagsCost()
		}
		cost += r.tagsCost()
	}
	cost += r.tagsCost()
	return cost + decompress, !r.bad
}

// allocCost is the heap an allocation of n bytes takes: Go rounds it up
// to a size class, at most an eighth more.
func allocCost(n int64) int64 {
	if n == 0 {
		return 0
	}
	return n + n/8 + 16
}

// wireReader walks Kafka's encoding without decoding it.
type wireReader struct {
	b        []byte
	flexible bool
	bad      bool
}

func (r *wireReader) skip(n int64) {
	if n < 0 || int64(len(r.b)) < n {
		r.bad, r.b = true, nil
		return
	}
	r.b = r.b[n:]
}

func (r *wireReader) uvarint() int64 {
	var x uint64
	for i := 0; i < 5; i++ {
		if len(r.b) == 0 {
			break
		}
		c := r.b[0]
		r.b = r.b[1:]
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(uint32(x))
		}
	}
	r.bad, r.b = true, nil
	return 0
}

func (r *wireReader) int16() int64 {
	if len(r.b) < 2 {
		r.bad, r.b = true, nil
		return 0
	}
	n := int16(r.b[0])<<8 | int16(r.b[1])
	r.b = r.b[2:]
	return int64(n)
}

func (r *wireReader) int32() int64 {
	if len(r.b) < 4 {
		r.bad, r.b = true, nil
		return 0
	}
	n := int32(r.b[0])<<24 | int32(r.b[1])<<16 | int32(r.b[2])<<8 | int32(r.b[3])
	r.b = r.b[4:]
	return int64(n)
}

// stringLen reads the length of a (nullable) string or bytes field: -1
// for null.
func (r *wireReader) stringLen() int64 {
	if r.flexible {
		return r.uvarint() - 1
	}
	return r.int16()
}

// bytesLen reads the length of a (nullable) bytes field: -1 for null.
func (r *wireReader) bytesLen() int64 {
	if r.flexible {
		return r.uvarint() - 1
	}
	return r.int32()
}

// arrayLen reads an array length, failing where kmsg would (more elements
// than bytes left).
func (r *wireReader) arrayLen() int64 {
	var n int64
	if r.flexible {
		n = r.uvarint() - 1
	} else {
		n = r.int32()
	}
	if n > int64(len(r.b)) {
		r.bad, r.b = true, nil
		return 0
	}
	return n
}

// tagsCost skips a tagged-field section (flexible versions) and returns
// the heap kmsg takes to keep its entries.
func (r *wireReader) tagsCost() int64 {
	if !r.flexible || r.bad {
		return 0
	}
	n := r.uvarint()
	if n == 0 {
		return 0
	}
	cost := int64(tagSectionCost)
	for i := int64(0); i < n && !r.bad; i++ {
		r.uvarint() // key
		r.skip(r.uvarint())
		cost += tagEntryCost
	}
	return cost
}
