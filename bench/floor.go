package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The floor of the raw read-back: the least work a broker process could
// do to serve it. After the raw read-back of a Strata broker the harness
// starts a floor server in a process of its own (`strata bench
// --serve-floor FILE`). It copies every partition's record batches from
// the broker into memory, then answers each Fetch v11 with a header it
// builds and slices of those batches, in one writev(2): no log, no fetch
// evaluation beyond finding the batch that holds the fetch offset. The
// raw reader then reads it as it read the broker, with the same
// connections and the same metadata round trip (asked of the broker). In
// the same run, the floor's records/s bound what any broker process could
// serve on the machine, and the floor's divided by kfake's is the most
// the page-cache goal's ratio could be. With PageCache the floor first
// writes the batches to files and reads each response's from them with
// pread(2) into a reused buffer: the least a broker serving from the page
// cache that way does.

// floorSpec is what the floor server is given: where to copy the
// partitions from, and up to which offsets.
type floorSpec struct {
	helperSpec
	// PageCache: serve from files in Dir (written once, so in the page
	// cache) with pread into reused buffers, instead of from memory.
	PageCache bool   `json:"page_cache,omitempty"`
	Dir       string `json:"dir,omitempty"`
}

// floorPart is one partition's batches, back to back, with the base
// offset and the start of each.
type floorPart struct {
	data  []byte
	bases []int64
	pos   []int // start of each batch in data; pos[len(bases)] == len(data)
	end   int64
	// file, when set, holds data instead (the page-cache floor): the
	// batches are read from it with pread(2) into per-connection buffers.
	file *os.File
}

// floorMaxRequest bounds a request frame the floor server reads.
const floorMaxRequest = 1 << 20

// collectFloor copies the batches of every partition in end, from offset
// 0 up to its end, from the partitions' leaders.
func collectFloor(ctx context.Context, br brokers, end map[tp]int64) (map[tp]*floorPart, error) {
	leaders, err := partitionLeaders(ctx, br, end)
	if err != nil {
		return nil, err
	}
	parts := map[tp]*floorPart{}
	for addr, ps := range leaders {
		c, err := br.dial(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		rd := &rawReader{conn: c, r: bufio.NewReaderSize(c, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(rawClientID))}
		for _, p := range ps {
			fp, err := rd.copyPartition(p, end[p])
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("copy %s/%d: %w", p.topic, p.partition, err)
			}
			parts[p] = fp
		}
		c.Close()
	}
	return parts, nil
}

// copyPartition fetches a partition's whole batches from offset 0 to end.
func (rd *rawReader) copyPartition(p tp, end int64) (*floorPart, error) {
	fp := &floorPart{end: end}
	rp := &rawPart{tp: p, end: end}
	for rp.next < end {
		resp, err := rd.fetch([]*rawPart{rp})
		if err != nil {
			return nil, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, errors.New("fetch response without the partition")
		}
		r := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, err
		}
		b := r.RecordBatches
		w, err := walkBatches(b, rp.next)
		if err != nil {
			return nil, err
		}
		if w.batches == 0 {
			return nil, fmt.Errorf("no whole batch at offset %d", rp.next)
		}
		// Keep the batches that end at or after the fetch offset: the
		// ones walkBatches counted.
		for len(b) >= batchHeaderSize {
			base := int64(binary.BigEndian.Uint64(b))
			size := batchLengthOffset + 4 + int(int32(binary.BigEndian.Uint32(b[batchLengthOffset:])))
			if size > len(b) {
				break
			}
			last := base + int64(int32(binary.BigEndian.Uint32(b[batchLastDeltaOffset:])))
			if last >= rp.next && last < w.next {
				fp.bases = append(fp.bases, base)
				fp.pos = append(fp.pos, len(fp.data))
				fp.data = append(fp.data, b[:size]...)
			}
			b = b[size:]
		}
		rp.next = w.next
	}
	fp.pos = append(fp.pos, len(fp.data))
	fp.data = slices.Clip(fp.data)
	return fp, nil
}

// startFloor starts the floor server on a copy of the partitions in end,
// which seeds lead, and returns once it is ready.
func startFloor(ctx context.Context, cfg Config, br brokers, end map[tp]int64, pageCache bool) (*strataTarget, error) {
	bin, err := helperBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-bench-floor-")
	if err != nil {
		return nil, err
	}
	spec := floorSpec{helperSpec: newHelperSpec(br, end), PageCache: pageCache}
	if pageCache {
		spec.Dir = dir
	}
	file, err := writeSpec(dir, "floor.json", spec)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &strataTarget{bin: bin, dataDir: dir, env: os.Environ(), args: []string{"bench", "--serve-floor", file}}
	if err := s.launch(ctx, cfg); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// ServeFloor runs the floor server of the spec in file: it copies the
// partitions, prints a ready line (as `strata serve` does) to out, and
// serves until ctx ends.
func ServeFloor(ctx context.Context, file string, out io.Writer) error {
	var spec floorSpec
	if err := readSpec(file, "floor", &spec); err != nil {
		return err
	}
	br, err := spec.brokers()
	if err != nil {
		return err
	}
	parts, err := collectFloor(ctx, br, spec.ends())
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	if spec.PageCache {
		if err := floorToFiles(parts, spec.Dir); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		defer func() {
			for _, fp := range parts {
				fp.file.Close()
			}
		}()
	}
	runtime.GC() // the copy's garbage, collected before the passes rather than during the first

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ready broker_id=-1 listen=%s\n", ln.Addr())
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			serveFloorConn(c, parts)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		})
	}
	wg.Wait()
	return ctx.Err()
}

// floorToFiles moves every partition's batches from memory into a file
// of its own in dir.
func floorToFiles(parts map[tp]*floorPart, dir string) error {
	i := 0
	for _, fp := range parts {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("partition-%d", i)))
		if err != nil {
			return err
		}
		i++
		fp.file = f
		if _, err := f.Write(fp.data); err != nil {
			return err
		}
		fp.data = nil
	}
	return nil
}

// serveFloorConn answers Fetch v11 requests on c until it closes or sends
// anything else.
func serveFloorConn(c net.Conn, parts map[tp]*floorPart) error {
	r := bufio.NewReaderSize(c, 64<<10)
	var size [4]byte
	var body, head []byte
	var bufs net.Buffers
	var scratch []byte // the page-cache floor's read buffer, reused
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return err
		}
		n := int(int32(binary.BigEndian.Uint32(size[:])))
		if n < 10 || n > floorMaxRequest {
			return fmt.Errorf("request of %d bytes", n)
		}
		body = slices.Grow(body[:0], n)[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		corr, req, err := parseFloorRequest(body)
		if err != nil {
			return err
		}
		head, bufs, scratch, err = floorResponse(head[:0], bufs[:0], scratch, corr, req, parts)
		if err != nil {
			return err
		}
		if _, err := bufs.WriteTo(c); err != nil {
			return err
		}
	}
}

// parseFloorRequest decodes a request frame's body (header v1 and a Fetch
// v11 request); anything else is an error.
func parseFloorRequest(body []byte) (uint32, *kmsg.FetchRequest, error) {
	if len(body) < 10 {
		return 0, nil, fmt.Errorf("request of %d bytes", len(body))
	}
	key, version := int16(binary.BigEndian.Uint16(body)), int16(binary.BigEndian.Uint16(body[2:]))
	corr := binary.BigEndian.Uint32(body[4:])
	client := max(int(int16(binary.BigEndian.Uint16(body[8:]))), 0)
	if key != 1 || version != rawFetchVersion {
		return 0, nil, fmt.Errorf("request key %d version %d: the floor serves Fetch v%d only", key, version, rawFetchVersion)
	}
	if 10+client > len(body) {
		return 0, nil, errors.New("client id past the end of the request")
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	if err := req.ReadFrom(body[10+client:]); err != nil {
		return 0, nil, err
	}
	return corr, req, nil
}

// floorResponse encodes the Fetch v11 response to req: head holds every
// field but the record batches, bufs the pieces of head and the batches
// in order; the batches of partitions kept in files are read into
// scratch.
func floorResponse(head []byte, bufs net.Buffers, scratch []byte, corr uint32, req *kmsg.FetchRequest, parts map[tp]*floorPart) ([]byte, net.Buffers, []byte, error) {
	// Where each partition's batches lie, in request order; and room for
	// every fixed field and every batch read from a file, so that head
	// and scratch never move while bufs holds slices of them.
	var spans [][2]int
	need, fromFiles := 22, 0
	for _, t := range req.Topics {
		need += 6 + len(t.Topic) + len(t.Partitions)*42
		for _, p := range t.Partitions {
			var lo, hi int
			if fp := parts[tp{t.Topic, p.Partition}]; fp != nil {
				lo, hi = fp.read(p.FetchOffset, int(p.PartitionMaxBytes))
				if fp.file != nil {
					fromFiles += hi - lo
				}
			}
			spans = append(spans, [2]int{lo, hi})
		}
	}
	head = slices.Grow(head, need)
	scratch = slices.Grow(scratch[:0], fromFiles)
	be := binary.BigEndian
	head = be.AppendUint32(head, 0) // size, set below
	head = be.AppendUint32(head, corr)
	head = be.AppendUint32(head, 0) // ThrottleMillis
	head = be.AppendUint16(head, 0) // ErrorCode
	head = be.AppendUint32(head, 0) // SessionID
	head = be.AppendUint32(head, uint32(len(req.Topics)))
	from, total := 0, 0
	for _, t := range req.Topics {
		head = be.AppendUint16(head, uint16(len(t.Topic)))
		head = append(head, t.Topic...)
		head = be.AppendUint32(head, uint32(len(t.Partitions)))
		for _, p := range t.Partitions {
			fp := parts[tp{t.Topic, p.Partition}]
			span := spans[0]
			spans = spans[1:]
			var batches []byte
			code, hw := kerr.UnknownTopicOrPartition.Code, int64(-1)
			if fp != nil {
				code, hw = 0, fp.end
				if fp.file == nil {
					batches = fp.data[span[0]:span[1]]
				} else {
					at := len(scratch)
					scratch = scratch[:at+span[1]-span[0]]
					batches = scratch[at:]
					if _, err := fp.file.ReadAt(batches, int64(span[0])); err != nil {
						return head, bufs, scratch, err
					}
				}
			}
			head = be.AppendUint32(head, uint32(p.Partition))
			head = be.AppendUint16(head, uint16(code))
			head = be.AppendUint64(head, uint64(hw)) // HighWatermark
			head = be.AppendUint64(head, uint64(hw)) // LastStableOffset
			head = be.AppendUint64(head, 0)          // LogStartOffset
			head = be.AppendUint32(head, 0xffffffff) // AbortedTransactions: null
			head = be.AppendUint32(head, 0xffffffff) // PreferredReadReplica: -1
			head = be.AppendUint32(head, uint32(len(batches)))
			bufs = append(bufs, head[from:])
			from = len(head)
			if len(batches) > 0 {
				bufs = append(bufs, batches)
			}
			total += len(batches)
		}
	}
	total += len(head)
	be.PutUint32(head, uint32(total-4))
	if from < len(head) {
		bufs = append(bufs, head[from:])
	}
	return head, bufs, scratch, nil
}

// read returns where the whole batches from the one holding offset on, up
// to max bytes (at least one batch, as KIP-74 says), lie in the
// partition's data.
func (fp *floorPart) read(offset int64, max int) (from, to int) {
	i := sort.Search(len(fp.bases), func(i int) bool { return fp.bases[i] > offset }) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(fp.bases) || offset >= fp.end {
		return 0, 0
	}
	j := i + 1
	for j < len(fp.bases) && fp.pos[j+1]-fp.pos[i] <= max {
		j++
	}
	return fp.pos[i], fp.pos[j]
}
