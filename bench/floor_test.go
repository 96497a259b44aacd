package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testFloorPart is a partition of three batches: offsets 0-4, 5-7, 8-11.
func testFloorPart() (*floorPart, [][]byte) {
	bs := [][]byte{testBatch(0, 5, 10, 0), testBatch(5, 3, 10, 0), testBatch(8, 4, 10, 0)}
	fp := &floorPart{end: 12}
	for i, b := range bs {
		fp.bases = append(fp.bases, []int64{0, 5, 8}[i])
		fp.pos = append(fp.pos, len(fp.data))
		fp.data = append(fp.data, b...)
	}
	fp.pos = append(fp.pos, len(fp.data))
	return fp, bs
}

func TestFloorPartRead(t *testing.T) {
	fp, bs := testFloorPart()
	for _, c := range []struct {
		offset int64
		max    int
		want   []byte
	}{
		{0, 1 << 20, fp.data},
		{3, 1 << 20, fp.data},                   // the batch holding offset 3 on
		{5, 1 << 20, fp.data[len(bs[0]):]},      // from the second batch
		{6, len(bs[1]) + len(bs[2]) - 1, bs[1]}, // the third would pass max
		{9, 1, bs[2]},                           // at least one batch (KIP-74)
		{12, 1 << 20, nil},                      // at the end
		{-1, len(bs[0]), bs[0]},                 // before the start: the first batch
		{0, len(bs[0]) + len(bs[1]), fp.data[:len(bs[0])+len(bs[1])]}, // exactly two
	} {
		from, to := fp.read(c.offset, c.max)
		if got := fp.data[from:to]; !bytes.Equal(got, c.want) {
			t.Errorf("read(%d, %d): %d bytes, want %d", c.offset, c.max, len(got), len(c.want))
		}
	}
}

// TestFloorResponse decodes what floorResponse writes with kmsg, from
// memory and from files.
func TestFloorResponse(t *testing.T) {
	for _, pageCache := range []bool{false, true} {
		fp, bs := testFloorPart()
		parts := map[tp]*floorPart{{"a", 0}: fp, {"b", 1}: fp}
		data := fp.data
		if pageCache {
			if err := floorToFiles(map[tp]*floorPart{{"a", 0}: fp}, t.TempDir()); err != nil {
				t.Fatal(err)
			}
			defer fp.file.Close()
		}
		testFloorResponse(t, parts, data, bs)
	}
}

func testFloorResponse(t *testing.T, parts map[tp]*floorPart, data []byte, bs [][]byte) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = rawFetchVersion
	for _, x := range []struct {
		topic  string
		parts  []int32
		offset int64
	}{{"a", []int32{0, 7}, 5}, {"b", []int32{1}, 12}, {"c", []int32{0}, 0}} {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = x.topic
		for _, p := range x.parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, x.offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	var out []byte
	var head, scratch []byte
	var bufs net.Buffers
	for range 2 { // the second time reuses the buffers
		var err error
		head, bufs, scratch, err = floorResponse(head[:0], bufs[:0], scratch, 42, req, parts)
		if err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		if _, err := bufs.WriteTo(&w); err != nil {
			t.Fatal(err)
		}
		out = w.Bytes()
	}
	if size := binary.BigEndian.Uint32(out); int(size) != len(out)-4 {
		t.Fatalf("size field %d, frame of %d bytes", size, len(out)-4)
	}
	if corr := binary.BigEndian.Uint32(out[4:]); corr != 42 {
		t.Fatalf("correlation id %d", corr)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = rawFetchVersion
	if err := resp.ReadFrom(out[8:]); err != nil {
		t.Fatal(err)
	}
	type got struct {
		topic string
		part  int32
		code  int16
		hw    int64
		n     int
	}
	var gots []got
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			gots = append(gots, got{rt.Topic, rp.Partition, rp.ErrorCode, rp.HighWatermark, len(rp.RecordBatches)})
		}
	}
	unknown := kerr.UnknownTopicOrPartition.Code
	want := []got{
		{"a", 0, 0, 12, len(bs[1]) + len(bs[2])},
		{"a", 7, unknown, -1, 0},
		{"b", 1, 0, 12, 0},
		{"c", 0, unknown, -1, 0},
	}
	if len(gots) != len(want) {
		t.Fatalf("partitions %+v, want %+v", gots, want)
	}
	for i := range want {
		if gots[i] != want[i] {
			t.Errorf("partition %d: %+v, want %+v", i, gots[i], want[i])
		}
	}
	if !bytes.Equal(resp.Topics[0].Partitions[0].RecordBatches, data[len(bs[0]):]) {
		t.Error("batches of a/0 differ from the partition's")
	}
}

// TestServeFloor copies a kfake cluster's partitions into a floor server
// and reads them back with the raw reader, through the floor.
func TestServeFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "floor"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("floor"),
		kgo.ProducerBatchMaxBytes(4<<10), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range 600 {
		rs = append(rs, &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 100)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	br := plaintext(seeds...)
	end, err := endOffsets(ctx, br, []string{"floor"})
	if err != nil {
		t.Fatal(err)
	}

	var live counters
	direct, err := rawReadBack(ctx, br, end, &live, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, pageCache := range []bool{false, true} {
		testServeFloor(t, ctx, br, end, direct, pageCache)
	}
}

func testServeFloor(t *testing.T, ctx context.Context, br brokers, end map[tp]int64, direct RawReadBack, pageCache bool) {
	spec := floorSpec{helperSpec: newHelperSpec(br, end), PageCache: pageCache, Dir: t.TempDir()}
	file, err := writeSpec(t.TempDir(), "floor.json", spec)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- ServeFloor(sctx, file, pw); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v (%v)", err, <-served)
	}
	go io.Copy(io.Discard, pr)
	addr, ok := parseReady(line)
	if !ok {
		t.Fatalf("ready line %q", line)
	}

	if pageCache {
		if files, _ := os.ReadDir(spec.Dir); len(files) != len(end) {
			t.Errorf("page-cache floor: %d files for %d partitions", len(files), len(end))
		}
	}
	var live counters
	floor, err := rawReadBack(ctx, br, end, &live, addr)
	if err != nil {
		t.Fatal(err)
	}
	if floor.Records != 600 || floor.Bytes != direct.Bytes || floor.Batches != direct.Batches {
		t.Fatalf("through the floor: %d records, %d bytes in %d batches; direct: %d records, %d bytes in %d batches",
			floor.Records, floor.Bytes, floor.Batches, direct.Records, direct.Bytes, direct.Batches)
	}

	// Anything but Fetch v11 closes the connection.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, av, 1))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Fatalf("ApiVersions got %d bytes back, want the connection closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("ApiVersions: the connection stayed open")
	}

	stop()
	if err := <-served; err != context.Canceled {
		t.Fatalf("ServeFloor after cancel: %v", err)
	}
}

func TestServeFloorBadSpec(t *testing.T) {
	file := filepath.Join(t.TempDir(), "floor.json")
	os.WriteFile(file, []byte("{"), 0o644)
	err := ServeFloor(t.Context(), file, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "floor spec") {
		t.Fatalf("bad spec: %v", err)
	}
}

// FuzzFloorRequest feeds arbitrary request bodies to the floor's parser;
// what parses gets a response that kmsg decodes.
func FuzzFloorRequest(f *testing.F) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = rawFetchVersion
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "a"
	rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	f.Add(kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 7)[4:])
	f.Add([]byte{0, 1, 0, 11, 0, 0, 0, 1, 0xff, 0xff})
	fp, _ := testFloorPart()
	parts := map[tp]*floorPart{{"a", 0}: fp}
	f.Fuzz(func(t *testing.T, body []byte) {
		corr, req, err := parseFloorRequest(body)
		if err != nil {
			return
		}
		_, bufs, _, err := floorResponse(nil, nil, nil, corr, req, parts)
		if err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		bufs.WriteTo(&w)
		out := w.Bytes()
		if int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("size field wrong")
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = rawFetchVersion
		if err := resp.ReadFrom(out[8:]); err != nil {
			t.Fatalf("response does not decode: %v", err)
		}
	})
}

func TestChildMain(t *testing.T) {
	if handled, err := ChildMain(t.Context(), []string{"--preset", "throughput"}, io.Discard); handled || err != nil {
		t.Fatalf("bench flags taken for a helper: %v %v", handled, err)
	}
	file := filepath.Join(t.TempDir(), "spec.json")
	os.WriteFile(file, []byte("["), 0o644)
	if handled, err := ChildMain(t.Context(), []string{"--read-back-client", file}, io.Discard); !handled || err == nil || !strings.Contains(err.Error(), "read-back spec") {
		t.Fatalf("bad read-back spec: %v %v", handled, err)
	}
}
