package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// kcatLine is one record as kcat -C prints it with kcatFormat.
type kcatLine struct {
	p       int32
	o       int64
	k, v, h string
}

// kcatFormat prints partition, offset, key, value and headers, tab-separated.
const kcatFormat = "%p\t%o\t%k\t%s\t%h\n"

// TestKcat round-trips records through librdkafka's kcat: kcat produces
// (with each codec, and once idempotently) and both kcat and franz-go read
// back exactly what was sent; then kcat reads what franz-go produced.
func TestKcat(t *testing.T) {
	kcat := testenv.RequireKcat(t)
	b := testenv.StartBroker(t, testenv.BrokerOptions{})
	for _, cc := range codecs {
		t.Run("kcat-produce-"+cc.name, func(t *testing.T) {
			kcatRoundTrip(t, kcat, b.Addr(), "kcat-"+cc.name, cc, nil)
		})
	}
	t.Run("kcat-produce-idempotent-zstd", func(t *testing.T) {
		kcatRoundTrip(t, kcat, b.Addr(), "kcat-idempotent", codecs[4], []string{"-X", "enable.idempotence=true"})
	})
	t.Run("franz-produce-kcat-consume", func(t *testing.T) {
		topic := "franz-to-kcat"
		createTopic(t, b.Addr(), topic, 3, nil)
		cl := newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
		var recs []*kgo.Record
		for i := range 300 {
			recs = append(recs, &kgo.Record{
				Topic:   topic,
				Key:     fmt.Appendf(nil, "fk-%04d", i),
				Value:   fmt.Appendf(nil, "franz value %d %s", i, strings.Repeat("ß-", i%17)),
				Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(i))}},
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		lines := kcatConsume(t, kcat, b.Addr(), topic)
		type po struct {
			p int32
			o int64
		}
		byPos := map[po]kcatLine{}
		for _, l := range lines {
			byPos[po{l.p, l.o}] = l
		}
		if len(lines) != len(recs) {
			t.Errorf("kcat read %d records, franz-go produced %d", len(lines), len(recs))
		}
		for _, r := range recs {
			l, ok := byPos[po{r.Partition, r.Offset}]
			want := kcatLine{r.Partition, r.Offset, string(r.Key), string(r.Value), "n=" + string(r.Headers[0].Value)}
			if !ok || l != want {
				t.Errorf("partition %d offset %d: kcat read %+v (found %v), want %+v", r.Partition, r.Offset, l, ok, want)
			}
		}
	})
}

// kcatRoundTrip produces records with kcat -P into a new 3-partition topic
// and checks that kcat -C and a franz-go consumer read them back exactly,
// and that the stored batches carry the codec.
func kcatRoundTrip(t *testing.T, kcat, addr, topic string, cc codecCase, extra []string) {
	createTopic(t, addr, topic, 3, nil)
	const n = 500
	var in bytes.Buffer
	keys := make([]string, n)
	vals := map[string]string{}
	index := map[string]int{}
	for i := range n {
		keys[i] = fmt.Sprintf("key-%04d", i)
		vals[keys[i]] = fmt.Sprintf("v%04d %s ✓ %s", i, cc.name, strings.Repeat("strata kcat round trip ", 4+i%9))
		index[keys[i]] = i
		fmt.Fprintf(&in, "%s\t%s\n", keys[i], vals[keys[i]])
	}
	args := append([]string{"-b", addr, "-P", "-t", topic, "-K", "\t", "-z", cc.name, "-H", "src=kcat"}, extra...)
	runKcat(t, kcat, &in, args...)

	lines := kcatConsume(t, kcat, addr, topic)
	if len(lines) != n {
		t.Errorf("kcat read %d records back, produced %d", len(lines), n)
	}
	next := map[int32]int64{}
	lastIndex := map[int32]int{}
	seen := map[string]bool{}
	for _, l := range lines {
		if l.o != next[l.p] {
			t.Errorf("partition %d: offset %d follows %d (want contiguous from 0)", l.p, l.o, next[l.p]-1)
		}
		next[l.p] = l.o + 1
		i, ok := index[l.k]
		switch {
		case !ok:
			t.Errorf("partition %d offset %d: unknown key %q", l.p, l.o, l.k)
			continue
		case seen[l.k]:
			t.Errorf("partition %d offset %d: key %q read twice", l.p, l.o, l.k)
		case l.v != vals[l.k]:
			t.Errorf("partition %d offset %d key %q: value %q, want %q", l.p, l.o, l.k, l.v, vals[l.k])
		case l.h != "src=kcat":
			t.Errorf("partition %d offset %d key %q: headers %q, want %q", l.p, l.o, l.k, l.h, "src=kcat")
		}
		if last, ok := lastIndex[l.p]; ok && i < last {
			t.Errorf("partition %d offset %d: key %q stored after key %q, produced before it", l.p, l.o, l.k, keys[last])
		}
		lastIndex[l.p] = i
		seen[l.k] = true
	}

	// A franz-go consumer reads the same records at the same offsets.
	_, end := offsets(t, addr, topic)
	for p, e := range end {
		if e != next[p] {
			t.Errorf("partition %d: end offset %d, kcat read up to %d", p, e, next[p])
		}
	}
	got := consumeAll(t, addr, topic, end)
	type po struct {
		p int32
		o int64
	}
	byPos := map[po]kcatLine{}
	for _, l := range lines {
		byPos[po{l.p, l.o}] = l
	}
	for _, r := range got {
		l := byPos[po{r.Partition, r.Offset}]
		h := ""
		if len(r.Headers) == 1 {
			h = r.Headers[0].Key + "=" + string(r.Headers[0].Value)
		}
		if string(r.Key) != l.k || string(r.Value) != l.v || h != l.h {
			t.Errorf("partition %d offset %d: franz-go read key %q value %q headers %q; kcat read %+v", r.Partition, r.Offset, r.Key, r.Value, h, l)
		}
	}
	if len(got) != len(lines) {
		t.Errorf("franz-go read %d records, kcat %d", len(got), len(lines))
	}
	for p, e := range end {
		for i, id := range batchCodecs(t, addr, topic, p, e) {
			if id != cc.id {
				t.Errorf("partition %d batch %d: stored codec %d, want %d (%s)", p, i, id, cc.id, cc.name)
			}
		}
	}
}

// kcatConsume reads every partition of topic from the beginning to its
// end with kcat (no consumer group) and returns the parsed lines.
func kcatConsume(t *testing.T, kcat, addr, topic string) []kcatLine {
	t.Helper()
	out := runKcat(t, kcat, nil, "-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatFormat)
	var lines []kcatLine
	for s := range strings.Lines(out) {
		f := strings.Split(strings.TrimSuffix(s, "\n"), "\t")
		if len(f) != 5 {
			t.Fatalf("kcat output line %q: want 5 tab-separated fields", s)
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kcat output line %q: bad partition or offset", s)
		}
		lines = append(lines, kcatLine{int32(p), o, f[2], f[3], f[4]})
	}
	return lines
}

// kcatTimedOut is set when a kcat run did not finish; later kcat subtests
// then fail at once instead of waiting out their own timeouts.
var kcatTimedOut atomic.Bool

// runKcat runs kcat with stdin and returns its stdout; a non-zero exit or
// anything on stderr that reports an error fails the test.
func runKcat(t *testing.T, kcat string, stdin *bytes.Buffer, args ...string) string {
	t.Helper()
	if kcatTimedOut.Load() {
		t.Fatalf("an earlier kcat run did not finish (see above); not starting kcat %q", args)
	}
	const limit = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		kcatTimedOut.Store(true)
		t.Fatalf("kcat %q: did not finish within %v (%d lines on stdout); stderr:\n%s", args, limit, strings.Count(stdout.String(), "\n"), stderr.String())
	}
	if err != nil {
		t.Fatalf("kcat %q: %v; stderr:\n%s", args, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "ERROR") || strings.Contains(stderr.String(), "failed") {
		t.Errorf("kcat %q reported errors:\n%s", args, stderr.String())
	}
	return stdout.String()
}
