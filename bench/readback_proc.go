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

// helperSpec is what a helper process is given (as JSON in a file):
// where to read, and every partition up to which offset.
type helperSpec struct {
	Seeds []string `json:"seeds"`
	// CA, when set, is the PEM of the CA whose certificates the brokers
	// serve TLS with.
	CA    string    `json:"ca,omitempty"`
	Parts []partEnd `json:"partitions"`
}

// partEnd is a partition and its end offset.
type partEnd struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	End       int64  `json:"end"`
}

func newHelperSpec(br brokers, end map[tp]int64) helperSpec {
	spec := helperSpec{Seeds: br.seeds, CA: string(br.caPEM)}
	for p, e := range end {
		spec.Parts = append(spec.Parts, partEnd{Topic: p.topic, Partition: p.partition, End: e})
	}
	return spec
}

// brokers is how the helper reaches the brokers.
func (s helperSpec) brokers() (brokers, error) { return overTLS(s.Seeds, []byte(s.CA)) }

func (s helperSpec) ends() map[tp]int64 {
	end := make(map[tp]int64, len(s.Parts))
	for _, p := range s.Parts {
		end[tp{p.Topic, p.Partition}] = p.End
	}
	return end
}

// writeSpec writes spec as JSON to the file name in dir and returns its
// path.
func writeSpec(dir, name string, spec any) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, name)
	return file, os.WriteFile(file, b, 0o644)
}

// readSpec reads the JSON spec in file into spec; what names it in errors.
func readSpec(file, what string, spec any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, spec); err != nil {
		return fmt.Errorf("%s spec %s: %w", what, file, err)
	}
	return nil
}

// ReadBackClient runs the read-back of the spec in file, readBackPasses
// passes, and writes the ReadBack as JSON to out.
func ReadBackClient(ctx context.Context, file string, out io.Writer) error {
	var spec helperSpec
	if err := readSpec(file, "read-back", &spec); err != nil {
		return err
	}
	var total int64
	for _, p := range spec.Parts {
		total += p.End
	}
	br, err := spec.brokers()
	if err != nil {
		return err
	}
	rb, err := readBackRun(ctx, br, spec.ends(), total)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(rb)
}

// readBackRun reads everything readBackPasses times with fresh
// clients; each pass must read total records.
func readBackRun(ctx context.Context, br brokers, end map[tp]int64, total int64) (*ReadBack, error) {
	res := &ReadBack{}
	var rb counters
	for i := range readBackPasses {
		records, bytes := rb.records.Load(), rb.bytes.Load()
		d, first, err := readBack(ctx, br, end, newTracker(&rb))
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
func readBackProcess(ctx context.Context, br brokers, end map[tp]int64) (*ReadBack, error) {
	bin, err := helperBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-bench-read-back-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file, err := writeSpec(dir, "read-back.json", newHelperSpec(br, end))
	if err != nil {
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
// `strata bench --read-back-client FILE`, `strata bench --serve-floor
// FILE` and `strata bench --serve-kfake -`. handled is false for any other
// arguments.
func ChildMain(ctx context.Context, args []string, stdout io.Writer) (handled bool, err error) {
	if len(args) != 2 {
		return false, nil
	}
	switch args[0] {
	case "--read-back-client":
		return true, ReadBackClient(ctx, args[1], stdout)
	case "--serve-kfake":
		return true, ServeKfake(ctx, stdout)
	case "--serve-floor":
		err := ServeFloor(ctx, args[1], stdout)
		if ctx.Err() != nil {
			err = nil // stopped by the harness
		}
		return true, err
	}
	return false, nil
}
