package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The franz-go read-back runs in a client process of its own (`strata
// bench --read-back-client FILE`), as an application would, not in the
// bench process. In the bench process the clients shared the heap of
// whatever else lived there, and kfake keeps every record it holds in
// memory: beside 500 MB of kfake the clients' garbage collector ran a few
// times a pass and a Strata broker in another process read back at 2,200
// to 2,750 MB/s; with nothing else in the heap, the same clients against
// the same broker read 830 MB/s. Against kfake itself the clients also
// shared its process and its collector. A client process of its own
// starts each target's read-back from the same state.

// readBackSpec is what a read-back client process is given: where to
// read, and up to which offsets.
type readBackSpec struct {
	Seeds []string   `json:"seeds"`
	Parts []floorEnd `json:"partitions"`
}

func partEnds(end map[tp]int64) []floorEnd {
	var ps []floorEnd
	for p, e := range end {
		ps = append(ps, floorEnd{Topic: p.topic, Partition: p.partition, End: e})
	}
	return ps
}

// ReadBackClient runs the read-back of the spec in file, readBackPasses
// passes, and writes the ReadBack as JSON to out.
func ReadBackClient(ctx context.Context, file string, out io.Writer) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var spec readBackSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("read-back spec %s: %w", file, err)
	}
	end := map[tp]int64{}
	var total int64
	for _, p := range spec.Parts {
		end[tp{p.Topic, p.Partition}] = p.End
		total += p.End
	}
	rb, err := readBackRun(ctx, spec.Seeds, end, total)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(rb)
}

// readBackRun reads everything readBackPasses times with fresh
// clients; each pass must read total records.
func readBackRun(ctx context.Context, seeds []string, end map[tp]int64, total int64) (*ReadBack, error) {
	res := &ReadBack{}
	var rb counters
	for i := range readBackPasses {
		records, bytes := rb.records.Load(), rb.bytes.Load()
		d, first, err := readBack(ctx, seeds, end, newTracker(&rb))
		if err != nil {
			return nil, err
		}
		p := ReadBackPass{
			Throughput:    throughput(rb.records.Load()-records, rb.bytes.Load()-bytes, d),
			FirstRecordMs: ms(first),
		}
		if p.Records != total {
			return nil, fmt.Errorf("read-back pass %d read %d records, topics hold %d", i+1, p.Records, total)
		}
		res.Passes = append(res.Passes, p)
		if i == 0 || p.Seconds < res.Seconds {
			res.ReadBackPass = p
		}
	}
	return res, nil
}

// readBackProcess runs the read-back in a client process of its own.
func readBackProcess(ctx context.Context, seeds []string, end map[tp]int64) (*ReadBack, error) {
	bin, err := helperBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-bench-read-back-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b, err := json.Marshal(readBackSpec{Seeds: seeds, Parts: partEnds(end)})
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "read-back.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "bench", "--read-back-client", file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("read-back client: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var rb ReadBack
	if err := json.Unmarshal(stdout.Bytes(), &rb); err != nil {
		return nil, fmt.Errorf("read-back client output: %w", err)
	}
	return &rb, nil
}

// ChildMain runs the bench's helper processes, which the harness starts as
// `strata bench --read-back-client FILE` and `strata bench --serve-floor
// FILE`. handled is false for any other arguments.
func ChildMain(ctx context.Context, args []string, stdout io.Writer) (handled bool, err error) {
	if len(args) != 2 {
		return false, nil
	}
	switch args[0] {
	case "--read-back-client":
		return true, ReadBackClient(ctx, args[1], stdout)
	case "--serve-floor":
		err := ServeFloor(ctx, args[1], stdout)
		if ctx.Err() != nil {
			err = nil // stopped by the harness
		}
		return true, err
	}
	return false, nil
}
