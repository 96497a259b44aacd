package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"strata/bench"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runBench implements `strata bench`: flags into bench.Configs, then the
// library runs, writes DIR and prints the markdown table.
func runBench(args []string) int {
	fs := flag.NewFlagSet("strata bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata bench [flags] --out DIR\n\npresets: %s\n\n", strings.Join(bench.PresetNames(), ", "))
		fs.PrintDefaults()
	}
	var (
		presets     = fs.String("preset", "throughput,latency", "comma-separated presets to run; flags below override their settings")
		records     = fs.Int64("records", 0, "records to produce")
		recordSize  = fs.Int("record-size", 0, "record value size in bytes")
		partitions  = fs.Int("partitions", 0, "partitions of the benchmark topic")
		rf          = fs.Int("replication-factor", 0, "replication factor of the benchmark topic")
		acks        = fs.String("acks", "", "acks: all (-1), 1 or 0")
		compression = fs.String("compression", "", "none, gzip, snappy, lz4 or zstd")
		linger      = fs.Duration("linger", 0, "producer linger")
		producers   = fs.Int("producers", 0, "producer clients")
		rate        = fs.Float64("rate", 0, "target records/s over all producers (open loop); 0 = max")
		duration    = fs.Duration("duration", 0, "with --rate: run this long; without: cap the produce phase")
		noIdem      = fs.Bool("no-idempotence", false, "disable the idempotent producer")
		strataBin   = fs.String("strata-bin", "", "strata binary to start (default: this executable)")
		out         = fs.String("out", "", "directory for report.json, report.md, bench.txt and plots (required)")
		results     = fs.String("results", "", "also write the markdown report to this file (e.g. bench/RESULTS.md)")
		count       = fs.Int("count", 1, "run the presets this many times (goals take the median ratio)")
		quiet       = fs.Bool("quiet", false, "no live progress line")
		targets     listFlag
		strataArgs  listFlag
	)
	fs.Var(&targets, "target", "strata, kfake or HOST:PORT (repeatable; default strata and kfake)")
	fs.Var(&strataArgs, "strata-arg", "extra argument to `strata serve` (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() > 0 || *count < 1 {
		fs.Usage()
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
		return 1
	}
	brokerLog, err := os.Create(filepath.Join(*out, "strata.log"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
		return 1
	}
	defer brokerLog.Close()

	var cfgs []bench.Config
	for name := range strings.SplitSeq(*presets, ",") {
		c, err := bench.Preset(strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
			return 2
		}
		if set["records"] {
			c.Records, c.Duration = *records, 0
		}
		if set["record-size"] {
			c.RecordSize = *recordSize
		}
		if set["partitions"] {
			c.Partitions = int32(*partitions)
		}
		if set["replication-factor"] {
			c.ReplicationFactor = int16(*rf)
		}
		if set["acks"] {
			c.Acks = *acks
		}
		if set["compression"] {
			c.Compression = *compression
		}
		if set["linger"] {
			c.Linger = *linger
		}
		if set["producers"] {
			c.Producers = *producers
		}
		if set["rate"] {
			c.Rate = *rate
		}
		if set["duration"] {
			c.Duration = *duration
		}
		c.NoIdempotence = *noIdem
		c.Targets = targets
		c.StrataBin = *strataBin
		c.StrataArgs = strataArgs
		c.BrokerLog = brokerLog
		if !*quiet {
			c.Progress = os.Stderr
		}
		cfgs = append(cfgs, c)
	}

	runs := cfgs
	for range *count - 1 {
		runs = append(runs, cfgs...)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	suite, runErr := bench.RunSuite(ctx, runs, bench.Issue2Goals)
	suite.Command = "strata bench " + strings.Join(args, " ")
	if err := suite.Write(*out); err != nil {
		fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
		return 1
	}
	if *results != "" {
		if err := suite.WriteMarkdown(*results, *out); err != nil {
			fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
			return 1
		}
	}
	fmt.Print(suite.Markdown(""))
	fmt.Fprintf(os.Stderr, "strata bench: %s, report in %s\n", time.Since(began).Round(time.Second), *out)
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "strata bench: %v\n", runErr)
		return 1
	}
	return 0
}
