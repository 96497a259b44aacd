package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"strata/bench"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runBench implements `strata bench`: flags and workload files into
// bench.Configs, then the library runs, writes DIR and prints the markdown
// table.
func runBench(args []string) int {
	// The harness's helper processes (--read-back-client, --serve-floor).
	hctx, hstop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	handled, err := bench.ChildMain(hctx, args, os.Stdout)
	hstop()
	if handled {
		if err != nil {
			fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("strata bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata bench [--preset NAME[,NAME…]] [--workload FILE]… [--duration D] [--target strata|kafka|kfake|kfake-process|cluster|kafka-cluster|strata-tls|kafka-tls|HOST:PORT]… --out DIR\n\npresets: %s (default: all)\n\n", strings.Join(bench.PresetNames(), ", "))
		fs.PrintDefaults()
	}
	var (
		presets     = fs.String("preset", strings.Join(bench.PresetNames(), ","), "comma-separated presets to run (default all, or none when --workload is given)")
		records     = fs.Int64("records", 0, "stop the run after this many measured records")
		recordSize  = fs.Int("record-size", 0, "record value size in bytes")
		topics      = fs.Int("topics", 0, "topics")
		partitions  = fs.Int("partitions", 0, "partitions per topic")
		rf          = fs.Int("replication-factor", 0, "replication factor of the topics")
		keys        = fs.String("key-distribution", "", "none, random, round-robin or zipf")
		keySpace    = fs.Int("key-space", 0, "distinct keys")
		acks        = fs.String("acks", "", "acks: all (-1), 1 or 0")
		compression = fs.String("compression", "", "none, gzip, snappy, lz4 or zstd")
		linger      = fs.Duration("linger", 0, "producer linger")
		producers   = fs.Int("producers", 0, "producer clients per topic")
		consumers   = fs.Int("consumers", 0, "consumer clients per topic (0: none during the run)")
		consumeMode = fs.String("consume-mode", "", "assign (partitions given by the harness) or group (Kafka consumer group)")
		balancer    = fs.String("balancer", "", "group mode: range (default, eager), round-robin, sticky or cooperative-sticky")
		rebalances  = fs.Int("rebalances", 0, "group mode: rebalances to measure (a member joins each group, then leaves)")
		rate        = fs.Float64("rate", 0, "target records/s over all producers (open loop); 0 = max")
		duration    = fs.Duration("duration", 0, "measured length of the run (clears a preset's record limit unless --records is given)")
		warmup      = fs.Duration("warmup", 0, "start of the run excluded from the figures")
		backlog     = fs.Int64("backlog", 0, "records produced before the consumers start (catch-up)")
		readBack    = fs.Bool("read-back", false, "read every record again from offset 0 after the run (franz-go consumers)")
		rawReadBack = fs.Bool("raw-read-back", false, "then read every record from offset 0 with raw Fetch requests, batches counted by their headers")
		sample      = fs.Duration("sample-interval", 0, "period of the timelines")
		noIdem      = fs.Bool("no-idempotence", false, "disable the idempotent producer")
		strataBin   = fs.String("strata-bin", "", "strata binary to start (default: this executable)")
		clusterSh   = fs.String("cluster-script", "", "deploy/local/cluster.sh for the cluster target (default: found above the working directory or this executable)")
		out         = fs.String("out", "", "directory for report.json, report.md, bench.txt and plots (required)")
		results     = fs.String("results", "", "also write the markdown report to this file (e.g. bench/RESULTS.md)")
		count       = fs.Int("count", 1, "run the workloads this many times (goals take the median ratio)")
		quiet       = fs.Bool("quiet", false, "no live progress line")
		moveSizes   = fs.String("move-sizes", "", "move preset: the history sizes to move, in GB, comma-separated (default 0.1,1,4)")
		targets     listFlag
		workloads   listFlag
		strataArgs  listFlag
	)
	fs.Var(&targets, "target", "strata, kafka (Apache Kafka, one KRaft node, fetched by deploy/install-deps.sh kafka), kfake, kfake-process (kfake in a process of its own), cluster (three brokers on ZooKeeper, deploy/local/cluster.sh), kafka-cluster (three Kafka nodes), strata-tls or kafka-tls (Strata or one Kafka node serving TLS only, with certificates made for the run) or HOST:PORT (repeatable; default per workload: cluster for faults, cluster, kafka-cluster and strata when replicated, strata-tls, kafka-tls and strata for the tls presets, strata and kafka for the transaction presets, else strata, kafka and kfake)")
	fs.Var(&workloads, "workload", "JSON workload file (repeatable; see bench/workloads)")
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

	var ws []bench.Workload
	if !set["workload"] || set["preset"] {
		for name := range strings.SplitSeq(*presets, ",") {
			w, err := bench.Preset(strings.TrimSpace(name))
			if err != nil {
				fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
				return 2
			}
			ws = append(ws, w)
		}
	}
	for _, path := range workloads {
		w, err := bench.LoadWorkload(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "strata bench: %v\n", err)
			return 2
		}
		ws = append(ws, w)
	}

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

	var sizes []float64
	if set["move-sizes"] {
		for f := range strings.SplitSeq(*moveSizes, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v <= 0 {
				fmt.Fprintf(os.Stderr, "strata bench: --move-sizes %q: want sizes in GB like 0.1,1,4\n", *moveSizes)
				return 2
			}
			sizes = append(sizes, v)
		}
	}
	var cfgs []bench.Config
	for _, w := range ws {
		if sizes != nil && w.Move != nil {
			m := *w.Move
			m.SizesGB = sizes
			w.Move = &m
		}
		if set["duration"] {
			w.Duration, w.Records = bench.Duration(*duration), 0
		}
		if set["records"] {
			w.Records = *records
		}
		override := map[string]func(){
			"record-size":        func() { w.RecordSize = *recordSize },
			"topics":             func() { w.Topics = *topics },
			"partitions":         func() { w.Partitions = int32(*partitions) },
			"replication-factor": func() { w.ReplicationFactor = int16(*rf) },
			"key-distribution":   func() { w.KeyDistribution = *keys },
			"key-space":          func() { w.KeySpace = *keySpace },
			"acks":               func() { w.Acks = *acks },
			"compression":        func() { w.Compression = *compression },
			"linger":             func() { w.Linger = bench.Duration(*linger) },
			"producers":          func() { w.Producers = *producers },
			"consumers":          func() { w.Consumers = *consumers },
			"consume-mode":       func() { w.ConsumeMode = *consumeMode },
			"balancer":           func() { w.Balancer = *balancer },
			"rebalances":         func() { w.Rebalances = *rebalances },
			"rate":               func() { w.Rate = *rate },
			"warmup":             func() { w.Warmup = bench.Duration(*warmup) },
			"backlog":            func() { w.Backlog = *backlog },
			"read-back":          func() { w.ReadBack = *readBack },
			"raw-read-back":      func() { w.RawReadBack = *rawReadBack },
			"sample-interval":    func() { w.SampleInterval = bench.Duration(*sample) },
			"no-idempotence":     func() { w.NoIdempotence = *noIdem },
		}
		for name, apply := range override {
			if set[name] {
				apply()
			}
		}
		c := bench.Config{
			Workload:      w,
			Targets:       targets,
			StrataBin:     *strataBin,
			ClusterScript: *clusterSh,
			StrataArgs:    strataArgs,
			BrokerLog:     brokerLog,
		}
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
	// The goals of the workloads that run (and those of every workload).
	var goals []bench.Goal
	for _, g := range bench.Goals {
		for _, w := range ws {
			if g.Workload == "" || g.Workload == w.Name {
				goals = append(goals, g)
				break
			}
		}
	}
	suite, runErr := bench.RunSuite(ctx, runs, goals)
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
