package compat

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// kcatRun runs kcat with stdin and returns its stdout.
func kcatRun(ctx context.Context, kcat, stdin string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, lastLines(errb.String(), 5))
	}
	return out.String(), nil
}

var kcatVersion = regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`)

func runKcat(t *testing.T, e *env) {
	const client = "kcat"
	kcat := testenv.RequireKcat(t)
	if v, err := exec.Command(kcat, "-V").CombinedOutput(); err == nil {
		if m := kcatVersion.FindSubmatch(v); m != nil {
			e.rec.version(client, fmt.Sprintf("%s (librdkafka %s)", m[1], m[2]))
		}
	}
	seeds := []string{e.addr}
	// read consumes n values of topic from the start, by partition
	// assignment (kcat -C without -G).
	read := func(ctx context.Context, topic string, n int) ([]string, error) {
		out, err := kcatRun(ctx, kcat, "", "-C", "-b", e.addr, "-t", topic, "-o", "beginning", "-c", fmt.Sprint(n), "-f", "%s\n", "-q")
		if err != nil {
			return nil, err
		}
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n"), nil
	}
	produceCheck := func(topic string, args ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if err := createTopic(ctx, seeds, topic, 1); err != nil {
				return err
			}
			vs := values(topic, records)
			args = append([]string{"-P", "-b", e.addr, "-t", topic, "-p", "0", "-X", "acks=all"}, args...)
			if _, err := kcatRun(ctx, kcat, strings.Join(vs, "\n")+"\n", args...); err != nil {
				return err
			}
			got, err := read(ctx, topic, records)
			if err != nil {
				return err
			}
			if !slices.Equal(got, vs) {
				return fmt.Errorf("read back %d records, not the %d produced in order", len(got), records)
			}
			return nil
		}
	}
	for _, c := range []string{"gzip", "snappy", "lz4", "zstd"} {
		e.check(t, client, "produce-"+c, produceCheck("k-"+c, "-z", c))
	}
	e.check(t, client, "produce-idempotent", produceCheck("k-idem", "-X", "enable.idempotence=true"))
	e.check(t, client, "consume-partition", func(ctx context.Context) error {
		const topic = "k-assign"
		vs := values(topic, records)
		if err := createTopic(ctx, seeds, topic, 3); err != nil {
			return err
		}
		if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
			return err
		}
		got, err := read(ctx, topic, records)
		if err != nil {
			return err
		}
		return sameSet(got, vs)
	})
	group := func(topic string, args ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			vs := values(topic, records)
			if err := createTopic(ctx, seeds, topic, 3); err != nil {
				return err
			}
			if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
				return err
			}
			g := topic + "-g"
			args = append([]string{"-b", e.addr, "-G", g, "-X", "auto.offset.reset=earliest", "-c", fmt.Sprint(records), "-f", "%s\n", "-q"}, args...)
			args = append(args, topic)
			out, err := kcatRun(ctx, kcat, "", args...)
			if err != nil {
				return err
			}
			if err := sameSet(strings.Split(strings.TrimSuffix(out, "\n"), "\n"), vs); err != nil {
				return err
			}
			if sum, err := committedSum(ctx, seeds, g, topic); err != nil || sum != records {
				return fmt.Errorf("committed offsets sum to %d, want %d (%v)", sum, records, err)
			}
			return nil
		}
	}
	e.check(t, client, "group-default", group("k-grp-default"))
	e.check(t, client, "group-cooperative", group("k-grp-coop", "-X", "partition.assignment.strategy=cooperative-sticky"))
	e.check(t, client, "leader-change", func(ctx context.Context) error {
		const topic = "lc-kcat"
		// One kcat producer outlives the leader change: half its records
		// go before, half after.
		cmd := exec.CommandContext(ctx, kcat, "-P", "-b", strings.Join(e.seeds, ","), "-t", topic, "-p", "0", "-X", "enable.idempotence=true", "-X", "linger.ms=0")
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			return err
		}
		defer cmd.Process.Kill()
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		var endErr error
		end := func() int64 {
			o, err := adm.ListEndOffsets(ctx, topic)
			if err == nil {
				err = o.Error()
			}
			if endErr = err; err != nil {
				return -1
			}
			l, _ := o.Lookup(topic, 0)
			return l.Offset
		}
		wait := func(n int64) error {
			for end() < n {
				if ctx.Err() != nil {
					return fmt.Errorf("end offset %d (%v), want %d: %s", end(), endErr, n, errb.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		}
		// kcat reads stdin in buffered blocks (4 KiB), so 1 KiB lines: the
		// first blocks are produced while the rest is still to come.
		line := func(s string) string { return s + strings.Repeat(".", 1023-len(s)) + "\n" }
		io.WriteString(in, strings.Repeat(line("before"), 10))
		if err := wait(4); err != nil {
			return err
		}
		if err := e.moveLeader(ctx, topic); err != nil {
			return err
		}
		io.WriteString(in, strings.Repeat(line("after"), 10))
		in.Close()
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("kcat producer across the leader change: %w: %s", err, errb.String())
		}
		if n := end(); n != 20 {
			return fmt.Errorf("end offset %d after 20 records", n)
		}
		out, err := kcatRun(ctx, kcat, "", "-L", "-b", strings.Join(e.seeds, ","), "-t", topic)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("partition 0, leader %d,", newLeader); !strings.Contains(out, want) {
			return fmt.Errorf("kcat -L does not say %q: %s", want, out)
		}
		return nil
	})
	runKcatSecurity(t, e, kcat)
}
