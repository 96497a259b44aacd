package network

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/internal/vfs"
)

// testRecords is one partition's records in a test fetch response: parts
// in memory (a remote read's cached chunks) or a slice of a file.
type testRecords struct {
	mem   [][]byte
	slice plog.FileSlice
}

// tcpPair returns the two ends of a loopback TCP connection, closed at
// the end of the test.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// sendTestFetch sends a fetch response of version with one partition per
// entry of recs through cc's writer, reads the frame back from the other end
// of a loopback TCP connection and returns it decoded (nil if the writer
// failed, which closes the connection). It checks the frame's size prefix
// and correlation id and that every release ran.
func sendTestFetch(t *testing.T, pool *copyPool, version int16, recs []testRecords) *kmsg.FetchResponse {
	t.Helper()
	client, server := tcpPair(t)
	cc := &Conn{conn: server, log: slog.New(slog.NewTextHandler(io.Discard, nil)), copyBufs: pool}
	cc.marker.init()

	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	o := outResp{corr: 42, Response: Response{Msg: resp}}
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	released := 0
	for i, r := range recs {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = int32(i)
		m := cc.marker.next()
		rp.RecordBatches = m[:]
		ref := SpliceRef{Marker: m, Slice: r.slice}
		if r.mem != nil {
			ref = SpliceRef{Marker: m, Mem: r.mem}
			for _, p := range r.mem {
				ref.MemLen += int64(len(p))
			}
		}
		o.Splices = append(o.Splices, ref)
		o.Release = append(o.Release, func() { released++ })
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	sent := make(chan bool, 1)
	go func() {
		ok := cc.respond(o)
		server.Close()
		sent <- ok
	}()

	frame, rerr := io.ReadAll(client)
	ok := <-sent
	if released != len(recs) {
		t.Fatalf("v%d: %d releases ran, want %d", version, released, len(recs))
	}
	if !ok {
		return nil
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(frame) < 8 || int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		t.Fatalf("v%d: %d bytes read, the size prefix says %d", version, len(frame), binary.BigEndian.Uint32(frame))
	}
	frame = frame[4:]
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != 42 {
		t.Fatalf("v%d: correlation id %d", version, corr)
	}
	body := frame[4:]
	if version >= 12 {
		body = body[1:] // header tags
	}
	got := kmsg.NewPtrFetchResponse()
	got.Version = version
	if err := got.ReadFrom(body); err != nil {
		t.Fatalf("v%d: decode: %v", version, err)
	}
	if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != len(recs) {
		t.Fatalf("v%d: %d topics", version, len(got.Topics))
	}
	return got
}

// checkTestFetch compares each partition's records in got with want.
func checkTestFetch(t *testing.T, what string, got *kmsg.FetchResponse, want [][]byte) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: the response was not sent", what)
	}
	for i, rp := range got.Topics[0].Partitions {
		if !bytes.Equal(rp.RecordBatches, want[i]) {
			t.Fatalf("%s: partition %d: %d record bytes, want %d", what, i, len(rp.RecordBatches), len(want[i]))
		}
	}
}

// TestSendMemParts: a fetch response whose partitions' records are
// in-memory parts (a remote read's cached chunks) goes out as one frame
// that decodes to each partition's parts joined, with the size prefix and
// the records' length prefixes right, for a flexible and an older version.
func TestSendMemParts(t *testing.T) {
	parts := [][][]byte{
		{[]byte("first chunk's tail|"), bytes.Repeat([]byte{7}, 300), []byte("|next chunk's head")},
		{bytes.Repeat([]byte("x"), 70000)}, // a length prefix of three varint bytes
	}
	var recs []testRecords
	var want [][]byte
	for _, p := range parts {
		recs = append(recs, testRecords{mem: p})
		want = append(want, bytes.Join(p, nil))
	}
	for _, version := range []int16{11, 12} { // 12 is flexible
		checkTestFetch(t, "mem parts", sendTestFetch(t, nil, version, recs), want)
	}
}

// noFd hides a file's descriptor, as files of the in-memory filesystem
// have none: such slices are always copied.
type noFd struct{ vfs.File }

// TestSendFileSlices: slices of segment files reach the consumer byte for
// byte whichever way they go out: with sendfile (socket.sendfile.enable),
// copied through the pool in one writev, copied in several writes (a
// response larger than copyWindow buffers), falling back to sendfile when
// the pool has no buffer free (from the start of a slice or part of the
// way through it), and copied from a file without a descriptor.
// Every lent buffer comes back, and a file shorter than its slice, or
// closed, fails the response rather than sending short.
func TestSendFileSlices(t *testing.T) {
	dir := t.TempDir()
	content := make([]byte, (copyWindow+3)*copyBufSize+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range content {
		content[i] = byte(rng.Uint32())
	}
	name := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.OS.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(vfs.FdFile); !ok {
		t.Fatal("an OS file has no descriptor")
	}
	slice := func(file vfs.File, pos, n int64) testRecords {
		return testRecords{slice: plog.FileSlice{File: file, Pos: pos, Len: n, LastOffset: -1}}
	}
	small := []testRecords{
		slice(f, 100, 5000),
		{mem: [][]byte{[]byte("remote"), []byte(" chunk")}},
		slice(f, 3*copyBufSize-7, copyBufSize+70000), // crosses buffers
	}
	smallWant := [][]byte{content[100:5100], []byte("remote chunk"), content[3*copyBufSize-7 : 4*copyBufSize+70000-7]}
	large := []testRecords{slice(f, 1, int64(len(content))-1), slice(f, 0, 10)}
	largeWant := [][]byte{content[1:], content[:10]}

	cases := []struct {
		name string
		pool func() *copyPool
		recs []testRecords
		want [][]byte
	}{
		{"sendfile", func() *copyPool { return nil }, small, smallWant},
		{"copied", func() *copyPool { return newCopyPool(copyBuffers) }, small, smallWant},
		{"copied in windows", func() *copyPool { return newCopyPool(copyBuffers) }, large, largeWant},
		{"one buffer", func() *copyPool { return newCopyPool(1) }, large, largeWant},
		{"pool empty", func() *copyPool {
			p := newCopyPool(1)
			p.get() // lent to another connection for good
			return p
		}, small, smallWant},
		{"pool emptied mid-slice", func() *copyPool {
			p := newCopyPool(2)
			gets := 0
			p.onGet = func() {
				if gets++; gets > 1 { // other connections take the rest
					p.free, p.made = nil, p.max
				}
			}
			return p
		}, large, largeWant},
		{"no descriptor", func() *copyPool { return newCopyPool(copyBuffers) },
			[]testRecords{slice(noFd{f}, 7, 2*copyBufSize)}, [][]byte{content[7 : 7+2*copyBufSize]}},
		{"no descriptor, no pool", func() *copyPool { return nil },
			[]testRecords{slice(noFd{f}, 7, 2*copyBufSize)}, [][]byte{content[7 : 7+2*copyBufSize]}},
	}
	for _, c := range cases {
		for _, version := range []int16{11, 12} {
			pool := c.pool()
			var lent int
			if pool != nil {
				lent = pool.out
			}
			checkTestFetch(t, c.name, sendTestFetch(t, pool, version, c.recs), c.want)
			if pool != nil && pool.out != lent {
				t.Fatalf("%s: %d buffers not given back", c.name, pool.out-lent)
			}
		}
	}

	// The file is shorter than the slice (truncated under the fetch), or
	// closed (its segment deleted under the fetch): the response fails and
	// the connection closes, with or without sendfile.
	closed, err := vfs.OS.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	for what, recs := range map[string][]testRecords{
		"a slice past the end of its file": {slice(f, int64(len(content))-100, 200)},
		"a slice of a closed file":         {slice(closed, 0, 200)},
	} {
		for _, pool := range []*copyPool{nil, newCopyPool(copyBuffers)} {
			if got := sendTestFetch(t, pool, 12, recs); got != nil {
				t.Fatalf("%s was sent (pool %v)", what, pool != nil)
			}
			if pool != nil && pool.out != 0 {
				t.Fatalf("%s: the failed response kept %d buffers", what, pool.out)
			}
		}
	}
}
