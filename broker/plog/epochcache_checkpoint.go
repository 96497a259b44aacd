package plog

// Encoding and parsing of leader-epoch-checkpoint (format in epochcache.go).

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

const epochCheckpointVersion = 0

// encodeEpochCheckpoint renders entries in Kafka's checkpoint text format.
func encodeEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", epochCheckpointVersion, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// parseEpochCheckpoint parses a checkpoint file. It never panics; malformed
// input is an error wrapping errCorruptEpochCheckpoint. As in Kafka's
// CheckpointFile, an empty file, or one with only the version line, is an
// empty checkpoint; "\r\n" line ends are accepted. Entries must have
// non-negative values and increasing epochs; an entry whose start offset is
// not above the previous ones' drops them (Kafka's assign rule, which older
// files written with equal start offsets need).
func parseEpochCheckpoint(buf []byte) ([]EpochEntry, error) {
	text := string(buf)
	if text == "" {
		return nil, nil
	}
	text = strings.TrimSuffix(text, "\n")
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	version, err := strconv.Atoi(lines[0])
	if err != nil || version != epochCheckpointVersion {
		return nil, fmt.Errorf("%w: version line %q", errCorruptEpochCheckpoint, epochCkptQuote(lines[0]))
	}
	if len(lines) == 1 {
		return nil, nil
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count < 0 {
		return nil, fmt.Errorf("%w: count line %q", errCorruptEpochCheckpoint, epochCkptQuote(lines[1]))
	}
	body := lines[2:]
	if len(body) != count {
		return nil, fmt.Errorf("%w: expected %d entries, found %d lines", errCorruptEpochCheckpoint, count, len(body))
	}
	var entries []EpochEntry
	for i, line := range body {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: entry %d %q", errCorruptEpochCheckpoint, i, epochCkptQuote(line))
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || off < 0 {
			return nil, fmt.Errorf("%w: entry %d %q", errCorruptEpochCheckpoint, i, epochCkptQuote(line))
		}
		e := EpochEntry{Epoch: int32(epoch), StartOffset: off}
		if !assignEpochEntry(&entries, e) {
			return nil, fmt.Errorf("%w: entry %d epoch %d is not newer than epoch %d",
				errCorruptEpochCheckpoint, i, e.Epoch, entries[len(entries)-1].Epoch)
		}
	}
	return entries, nil
}

// epochCkptQuote keeps error messages about bad input short.
func epochCkptQuote(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
