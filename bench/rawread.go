package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The raw read-back measures what a broker serves rather than what one
// client decodes: it sends Fetch requests built with kmsg over plain TCP
// connections and walks the record batches of each response by their
// headers (record count, offsets, CRC32C), without decoding a record.
// Its fetch sizes are the Java consumer's defaults.
const (
	rawFetchVersion      = 11       // names topics by name; every broker of Kafka 2.3+ serves it
	rawFetchMaxBytes     = 52428800 // fetch.max.bytes
	rawPartitionMaxBytes = 1048576  // max.partition.fetch.bytes
	rawFetchMaxWait      = 500 * time.Millisecond
	rawClientID          = "strata-bench-raw"
	// rawMaxResponse bounds a response frame: the fetch limit plus room
	// for a whole first batch per partition (KIP-74) and the framing.
	rawMaxResponse = 2 * rawFetchMaxBytes
)

// rawReadPasses is how many times the raw read-back reads everything.
// Other work on the machine only ever slows a pass down, so the fastest
// pass is the best estimate of what the broker can serve.
const rawReadPasses = 3

// RawPass is one pass of the raw read-back: readBackClients connections
// per partition leader, each with one Fetch in flight for its share of the
// leader's partitions, read every partition from offset 0.
type RawPass struct {
	// Records are counted from the batch headers; Bytes are the record
	// batches received (headers and record framing included, not the
	// response framing), so MBPerSec is record-batch bytes, not record
	// values as in the other phases.
	Throughput
	Batches     int64 `json:"batches"`  // every batch's CRC32C was checked
	Requests    int64 `json:"requests"` // Fetch requests answered
	Connections int   `json:"connections"`
	// FirstBatchMs is from the start of the pass (metadata, dialing) to
	// the first whole batch received, included in Seconds.
	FirstBatchMs float64 `json:"first_batch_ms"`
}

// RawReadBack is the raw read-back phase: rawReadPasses passes one after
// the other. Its own figures are those of the fastest pass.
type RawReadBack struct {
	RawPass
	Passes              []RawPass `json:"passes"`
	MedianRecordsPerSec float64   `json:"median_records_per_s"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record batch v2 header layout (Kafka's DefaultRecordBatch).
const (
	batchLengthOffset     = 8  // int32: bytes after this field
	batchMagicOffset      = 16 // int8
	batchCRCOffset        = 17 // uint32 CRC32C of attributes..end
	batchAttributesOffset = 21 // int16
	batchLastDeltaOffset  = 23 // int32 lastOffsetDelta
	batchCountOffset      = 57 // int32 recordsCount
	batchHeaderSize       = 61
	batchControlFlag      = 0x20 // attributes bit 5: a control batch (transaction markers)
)

// walked is what walking one partition's record batches found.
type walked struct {
	records int64 // data records at or after the fetch offset
	batches int64 // whole batches walked
	bytes   int64 // bytes of those batches
	next    int64 // offset after the last whole batch (the fetch offset when none)
}

// walkBatches walks the v2 record batches in b, which a broker returned for
// a fetch at offset from, checking each batch's CRC32C and counting its
// records from the header. A partial batch at the end, which brokers may
// return, is ignored. A batch that starts before from (the broker returns
// the whole batch holding the fetch offset) counts only its records from
// from on, which needs its offsets to be contiguous (no compaction).
func walkBatches(b []byte, from int64) (walked, error) {
	w := walked{next: from}
	for len(b) >= batchLengthOffset+4 {
		base := int64(binary.BigEndian.Uint64(b))
		length := int64(int32(binary.BigEndian.Uint32(b[batchLengthOffset:])))
		size := batchLengthOffset + 4 + length
		if length < batchHeaderSize-batchLengthOffset-4 {
			return w, fmt.Errorf("batch at offset %d: length %d is shorter than a batch header", base, length)
		}
		if int64(len(b)) < size {
			break // partial batch at the end of the response
		}
		batch := b[:size]
		b = b[size:]
		if magic := batch[batchMagicOffset]; magic != 2 {
			return w, fmt.Errorf("batch at offset %d: magic %d, want 2", base, magic)
		}
		if want, got := binary.BigEndian.Uint32(batch[batchCRCOffset:]), crc32.Checksum(batch[batchAttributesOffset:], castagnoli); want != got {
			return w, fmt.Errorf("batch at offset %d: CRC32C %08x, header says %08x: %w", base, got, want, kerr.CorruptMessage)
		}
		lastDelta := int64(int32(binary.BigEndian.Uint32(batch[batchLastDeltaOffset:])))
		count := int64(int32(binary.BigEndian.Uint32(batch[batchCountOffset:])))
		last := base + lastDelta
		if base < 0 || lastDelta < 0 || last < base || count < 0 || count > lastDelta+1 {
			return w, fmt.Errorf("batch at offset %d: %d records with last offset delta %d", base, count, lastDelta)
		}
		if last < w.next {
			continue // wholly before the fetch offset
		}
		if base < w.next {
			if count != lastDelta+1 {
				return w, fmt.Errorf("batch at offset %d holds fetch offset %d and has offset gaps: its records cannot be counted from the header", base, w.next)
			}
			count -= w.next - base
		}
		if binary.BigEndian.Uint16(batch[batchAttributesOffset:])&batchControlFlag != 0 {
			count = 0
		}
		w.records += count
		w.batches++
		w.bytes += size
		w.next = last + 1
	}
	return w, nil
}

// rawPart is one partition of a raw read-back connection.
type rawPart struct {
	tp
	next, end int64
}

// rawReader is one connection of the raw read-back.
type rawReader struct {
	conn  net.Conn
	r     *bufio.Reader
	parts []*rawPart
	fmt   *kmsg.RequestFormatter
	corr  int32
	out   []byte
	in    []byte
}

// rawReadBack makes rawReadPasses raw read passes over every partition in
// end; each pass must count every record. live receives records and batch
// bytes as they arrive (for the timeline). With via set, each pass asks
// seeds for the leaders as usual but connects to via instead (the floor
// server).
func rawReadBack(ctx context.Context, br brokers, end map[tp]int64, live *counters, via string) (RawReadBack, error) {
	var res RawReadBack
	var total int64
	for _, e := range end {
		total += e
	}
	var rates []float64
	for i := range rawReadPasses {
		p, err := rawReadPass(ctx, br, end, live, via)
		if err == nil && p.Records != total {
			err = fmt.Errorf("raw read-back pass %d counted %d records, the partitions hold %d", i+1, p.Records, total)
		}
		if err != nil {
			return res, err
		}
		res.Passes = append(res.Passes, p)
		rates = append(rates, p.RecordsPerSec)
		if i == 0 || p.Seconds < res.Seconds {
			res.RawPass = p
		}
	}
	res.MedianRecordsPerSec = median(rates)
	return res, nil
}

// rawReadPass reads every partition in end from offset 0 with raw Fetch
// requests until all have reached end; via, when set, is dialed instead
// of each leader.
func rawReadPass(ctx context.Context, br brokers, end map[tp]int64, live *counters, via string) (RawPass, error) {
	var res RawPass
	var got counters
	start := time.Now()
	leaders, err := partitionLeaders(ctx, br, end)
	if err != nil {
		return res, fmt.Errorf("raw read-back: %w", err)
	}
	var readers []*rawReader
	defer func() {
		for _, r := range readers {
			r.conn.Close()
		}
	}()
	addrs := make([]string, 0, len(leaders))
	for a := range leaders {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, addr := range addrs {
		parts := leaders[addr]
		n := min(readBackClients, len(parts))
		for i := range n {
			dial, dialer := addr, br
			if via != "" { // the floor server, in plaintext
				dial, dialer = via, plaintext()
			}
			c, err := dialer.dial(ctx, dial)
			if err != nil {
				return res, fmt.Errorf("raw read-back: dial %s: %w", dial, err)
			}
			rd := &rawReader{conn: c, r: bufio.NewReaderSize(c, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(rawClientID))}
			readers = append(readers, rd)
			for j := i; j < len(parts); j += n {
				p := parts[j]
				rd.parts = append(rd.parts, &rawPart{tp: p, end: end[p]})
			}
		}
	}
	res.Connections = len(readers)

	var firstAt, lastAt atomic.Int64
	var batches, requests atomic.Int64
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		for _, r := range readers {
			r.conn.SetDeadline(time.Now()) // unblock reads and writes
		}
	})
	defer stop()
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	for _, rd := range readers {
		wg.Go(func() {
			err := rd.run(func(w walked) {
				now := time.Now().UnixNano()
				requests.Add(1)
				if w.batches == 0 {
					return
				}
				firstAt.CompareAndSwap(0, now)
				for {
					l := lastAt.Load()
					if now <= l || lastAt.CompareAndSwap(l, now) {
						break
					}
				}
				batches.Add(w.batches)
				got.records.Add(w.records)
				got.bytes.Add(w.bytes)
				live.records.Add(w.records)
				live.bytes.Add(w.bytes)
			})
			if err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		})
	}
	wg.Wait()
	if perr := parent.Err(); perr != nil && firstErr != nil {
		firstErr = fmt.Errorf("%w (%v)", perr, firstErr) // the deadline cut the reads
	}
	done := start
	if l := lastAt.Load(); l > 0 {
		done = time.Unix(0, l)
	}
	res.Throughput = throughput(got.records.Load(), got.bytes.Load(), done.Sub(start))
	res.Batches, res.Requests = batches.Load(), requests.Load()
	if f := firstAt.Load(); f > 0 {
		res.FirstBatchMs = ms(time.Unix(0, f).Sub(start))
	}
	if firstErr != nil {
		return res, fmt.Errorf("raw read-back: %w", firstErr)
	}
	return res, nil
}

// run fetches until every partition of the connection reached its end.
// got is called once per response with what it held.
func (rd *rawReader) run(got func(walked)) error {
	for {
		var want []*rawPart
		for _, p := range rd.parts {
			if p.next < p.end {
				want = append(want, p)
			}
		}
		if len(want) == 0 {
			return nil
		}
		resp, err := rd.fetch(want)
		if err != nil {
			return err
		}
		var sum walked
		byKey := make(map[tp]*rawPart, len(want))
		for _, p := range want {
			byKey[p.tp] = p
		}
		for _, t := range resp.Topics {
			for _, fp := range t.Partitions {
				p := byKey[tp{t.Topic, fp.Partition}]
				if p == nil {
					return fmt.Errorf("fetch response for %s/%d, which was not asked for", t.Topic, fp.Partition)
				}
				if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
					return fmt.Errorf("fetch %s/%d at %d: %w", t.Topic, fp.Partition, p.next, err)
				}
				w, err := walkBatches(fp.RecordBatches, p.next)
				if err != nil {
					return fmt.Errorf("fetch %s/%d at %d: %w", t.Topic, fp.Partition, p.next, err)
				}
				if w.next > p.end {
					return fmt.Errorf("fetch %s/%d: a batch ends at %d, past the end offset %d read before", t.Topic, fp.Partition, w.next, p.end)
				}
				p.next = w.next
				sum.records += w.records
				sum.batches += w.batches
				sum.bytes += w.bytes
			}
		}
		got(sum)
	}
}

// fetch sends one Fetch request for parts and reads its response.
func (rd *rawReader) fetch(parts []*rawPart) (*kmsg.FetchResponse, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = rawFetchVersion
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(rawFetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = rawFetchMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1 // a full fetch, no session
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.topic
			req.Topics = append(req.Topics, t)
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p.partition
		fp.FetchOffset = p.next
		fp.LogStartOffset = -1
		fp.CurrentLeaderEpoch = -1
		fp.PartitionMaxBytes = rawPartitionMaxBytes
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, fp)
	}
	rd.corr++
	rd.out = rd.fmt.AppendRequest(rd.out[:0], req, rd.corr)
	if _, err := rd.conn.Write(rd.out); err != nil {
		return nil, fmt.Errorf("send fetch: %w", err)
	}
	var hdr [8]byte // size, correlation id (the response header of a non-flexible version)
	if _, err := io.ReadFull(rd.r, hdr[:]); err != nil {
		return nil, fmt.Errorf("read fetch response: %w", err)
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if size < 4 || size > rawMaxResponse {
		return nil, fmt.Errorf("fetch response of %d bytes", size)
	}
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != rd.corr {
		return nil, fmt.Errorf("fetch response has correlation id %d, want %d", corr, rd.corr)
	}
	if cap(rd.in) < int(size-4) {
		rd.in = make([]byte, size-4)
	}
	body := rd.in[:size-4]
	if _, err := io.ReadFull(rd.r, body); err != nil {
		return nil, fmt.Errorf("read fetch response: %w", err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = rawFetchVersion
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode fetch response: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	return resp, nil
}

// partitionLeaders returns the partitions of end by their leader's
// address, each list sorted.
func partitionLeaders(ctx context.Context, br brokers, end map[tp]int64) (map[string][]tp, error) {
	cl, err := br.client()
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	var topics []string
	for p := range end {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	addr := map[int32]string{}
	for _, b := range md.Brokers {
		addr[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	out := map[string][]tp{}
	for p := range end {
		td, ok := md.Topics[p.topic]
		if !ok || td.Err != nil {
			return nil, fmt.Errorf("metadata of %s: %v", p.topic, td.Err)
		}
		pd, ok := td.Partitions[p.partition]
		if !ok || pd.Err != nil || addr[pd.Leader] == "" {
			return nil, fmt.Errorf("no leader for %s/%d", p.topic, p.partition)
		}
		a := addr[pd.Leader]
		out[a] = append(out[a], p)
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b tp) int {
			if a.topic != b.topic {
				if a.topic < b.topic {
					return -1
				}
				return 1
			}
			return int(a.partition - b.partition)
		})
	}
	return out, nil
}
