package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

// TestQuickstartTierWithinAMinute mirrors "Tiered storage in a minute" of
// docs/tiered-storage.md: keep the two in step (TestQuickstartTierDocInStep
// checks the doc still says what this test does) (settings, topic configs, the amount
// produced and what is shown). A broker with a file tier that checks local
// retention and uploads every 5 s, a topic with remote.storage.enable=true,
// 1 MiB segments and local.retention.ms=10000, and kcat producing the
// lines of `head -c 3000000 /dev/urandom | base64`. Within a minute of the
// produce the sealed segments must be in the tier and gone from local
// disk, leaving only the active segment, while ListOffsets earliest stays
// 0 and a fresh consumer (kcat, as in the doc, and franz-go) reads
// every record back from offset 0, from the tier.
func TestQuickstartTierWithinAMinute(t *testing.T) {
	kcat := testenv.RequireKcat(t)
	tierDir := t.TempDir()
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Args:    []string{"--tier", "file://" + tierDir},
		Sets:    []string{"log.retention.check.interval.ms=5000", "remote.log.manager.task.interval.ms=5000"},
		Metrics: "127.0.0.1:0",
	})
	const topic = "tiered"
	str := func(s string) *string { return &s }
	createTopic(t, b.Addr(), topic, 1, map[string]*string{
		"remote.storage.enable": str("true"),
		"segment.bytes":         str("1048576"),
		"local.retention.ms":    str("10000"),
	})

	// head -c 3000000 /dev/urandom | base64: GNU base64 wraps at 76
	// columns, so 52632 lines of about 4 MB in all.
	raw := make([]byte, 3_000_000)
	rand.NewChaCha8([32]byte{14, 3}).Read(raw)
	enc := base64.StdEncoding.EncodeToString(raw)
	var lines []string
	for len(enc) > 0 {
		n := min(76, len(enc))
		lines = append(lines, enc[:n])
		enc = enc[n:]
	}
	input := strings.Join(lines, "\n") + "\n"
	if len(lines) != 52632 {
		t.Fatalf("%d lines to produce, docs/tiered-storage.md says 52632", len(lines))
	}

	// kcat -P -b ADDR -t tiered
	runKcat(t, kcat, bytes.NewBufferString(input), "-P", "-b", b.Addr(), "-t", topic)
	produced := time.Now()
	partDir := filepath.Join(b.DataDir(), topic+"-0")
	rolled := segmentLogs(t, partDir)
	if len(rolled) < 3 {
		t.Fatalf("%d local segments after producing %d bytes with segment.bytes=1048576 (%v), want at least 3", len(rolled), len(input), rolled)
	}
	// (No ListOffsets yet: until the broker's first tier pass has built
	// its remote index, earliest is REPLICA_NOT_AVAILABLE, as documented.)

	// Wait, as the doc's `sleep 30` does, until only the active segment
	// is left locally: the local log start (ListOffsets -4) is its base,
	// and the tier holds every offset below it.
	var local []string
	var localStart, tierEnd int64
	var problem string
	for deadline := produced.Add(time.Minute); ; {
		local = segmentLogs(t, partDir)
		localStart = listOffset(t, b.Addr(), topic, -4)
		_, tierEnd, problem = tierState(t, fileBucket(t, tierDir))
		if len(local) == 1 && local[0] == fmt.Sprintf("%020d.log", localStart) && localStart > 0 && tierEnd == localStart-1 && problem == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after producing: local segments %v of the %d rolled, local log start %d, tier ends at %d (problem %q); want only the active segment locally and the rest in the tier",
				time.Since(produced).Round(time.Second), local, len(rolled), localStart, tierEnd, problem)
		}
		time.Sleep(250 * time.Millisecond)
	}
	deleted := time.Since(produced)
	if localStart != lastBase(t, rolled) {
		t.Errorf("local log start %d, want the active segment's base %s", localStart, rolled[len(rolled)-1])
	}

	// bin/strata admin describe tiered: START (ListOffsets earliest) is
	// still 0, END unchanged.
	start, end := offsets(t, b.Addr(), topic)
	if start[0] != 0 || end[0] != int64(len(lines)) {
		t.Fatalf("earliest offset %d, end %d; want 0 and %d", start[0], end[0], len(lines))
	}

	// kcat -C -b ADDR -t tiered -o beginning -e -q: every line, as sent.
	out := runKcat(t, kcat, nil, "-C", "-b", b.Addr(), "-t", topic, "-o", "beginning", "-e", "-q")
	if out != input {
		t.Errorf("kcat read back %d lines (%d bytes), want the %d lines (%d bytes) produced, identical", strings.Count(out, "\n"), len(out), len(lines), len(input))
	}

	// A fresh franz-go consumer from offset 0: every record, identical.
	recs := consumeAll(t, b.Addr(), topic, end)
	if len(recs) != len(lines) {
		t.Fatalf("franz-go read %d records, want %d", len(recs), len(lines))
	}
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != lines[i] {
			t.Fatalf("record %d: offset %d, value %q; want offset %d, value %q", i, r.Offset, r.Value, i, lines[i])
		}
	}

	// curl -s METRICS/metrics | grep -i remotefetch: the reads below the
	// local log start were served from the tier.
	if n := metricValue(t, b, "kafka_server_brokertopicmetrics_remotefetchrequests_total"); n == 0 {
		t.Errorf("RemoteFetchRequests is 0 after reading offsets [0, %d) that are only in the tier", localStart)
	}
	if el := time.Since(produced); el > time.Minute {
		t.Errorf("the quickstart took %v after the produce, want within a minute", el.Round(time.Second))
	}
	t.Logf("%d lines in %d segments; %v after the produce only %s was local, the tier ended at %d; read back from 0 by %v",
		len(lines), len(rolled), deleted.Round(100*time.Millisecond), local[0], tierEnd, time.Since(produced).Round(100*time.Millisecond))
}

// segmentLogs returns the names of the live segment files (*.log, not
// *.log.deleted) in a partition directory, sorted.
func segmentLogs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("partition directory: %v", err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// lastBase is the base offset of the last of sorted segment file names.
func lastBase(t *testing.T, names []string) int64 {
	t.Helper()
	var base int64
	if _, err := fmt.Sscanf(names[len(names)-1], "%020d.log", &base); err != nil {
		t.Fatalf("segment file %q: %v", names[len(names)-1], err)
	}
	return base
}

// TestQuickstartTierDocInStep checks that "Tiered storage in a minute" of
// docs/tiered-storage.md, which the README links as its tiered quickstart,
// still runs what TestQuickstartTierWithinAMinute tests: the same broker
// settings, topic configs, amount produced, wait and outcome.
func TestQuickstartTierDocInStep(t *testing.T) {
	b, err := os.ReadFile("../../docs/tiered-storage.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Tiered storage in a minute\n")
	if start < 0 {
		t.Fatal(`docs/tiered-storage.md has no "## Tiered storage in a minute" section`)
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, want := range []string{
		`make run ARGS="--set log.retention.check.interval.ms=5000 --set remote.log.manager.task.interval.ms=5000"`,
		"bin/strata admin create tiered -p 1 -c remote.storage.enable=true -c segment.bytes=1048576 -c local.retention.ms=10000",
		"head -c 3000000 /dev/urandom | base64 | kcat -P -b 127.0.0.1:9092 -t tiered",
		"sleep 30",
		"kcat -C -b 127.0.0.1:9092 -t tiered -o beginning -e -q | wc -l",
		"52632",
		"(../internal/e2e/quickstart_tier_test.go)",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("docs/tiered-storage.md's \"Tiered storage in a minute\" no longer says %q: keep it and TestQuickstartTierWithinAMinute in step", want)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "(docs/tiered-storage.md#tiered-storage-in-a-minute)") {
		t.Error("README.md no longer links docs/tiered-storage.md#tiered-storage-in-a-minute")
	}
}
