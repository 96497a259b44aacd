package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const adminUsage = `usage: strata admin [--bootstrap HOST:PORT[,…]] [--json] <command> [args]

Administers a Strata (or Kafka) cluster, as Kafka's kafka-*.sh tools do.
--bootstrap names the brokers to contact; without it, the environment
variable STRATA_BOOTSTRAP, else BOOTSTRAP (which the cluster.env of
make cluster exports), else 127.0.0.1:9092. --json prints JSON on stdout
instead of tables. Both may stand anywhere on the command line. Every
command has --help.

topics and partitions:
  topics [list]                        list topics
  describe [TOPIC...]                  partitions: leader, replicas, ISR, offsets, local and remote bytes
  create TOPIC [-p N] [-r N] [-c k=v]  create a topic
  delete TOPIC...                      delete topics
  configs TOPIC | --broker ID | --broker-default
                                       configs with their values and sources
  alter TOPIC | --broker ID | --broker-default  k=v|k=...
                                       set (k=v) or delete (k=) configs
  tier [TOPIC...] [--metrics URL,...]  tiered storage per partition and per broker
consumer groups:
  groups [list]                        list groups with their state
  groups describe GROUP...             members, committed offsets and lag per partition
  groups reset GROUP (--to-earliest|--to-latest|--to-datetime T|--to-offset N|--shift-by N|--from-file F)
         (--topic T[:P,...]...|--all-topics) [--execute]
                                       reset committed offsets (a dry run without --execute)
  groups delete GROUP...               delete groups (empty ones only)
cluster:
  cluster brokers                      brokers, their addresses and racks, the controller
  cluster check                        under-replicated, under-min-ISR and offline partitions (exit 3 if any)
  cluster rebalance [--execute] [--throttle B] [--topics A,B]
                                       spread replicas and leaders evenly over the live brokers
  cluster drain [--timeout D]          refuse writes and upload everything to the bucket (scale to zero)
  cluster resume                       accept writes again after a drain
  broker decommission ID [--execute] [--throttle B]
                                       move every replica off broker ID before it stops
  reassign status                      the partition reassignments in progress
  reassign cancel [TOPIC[:PARTITION]...]
                                       cancel reassignments (all when none named)
  restore --zookeeper Z --tier URL     bring a cluster back from its bucket alone

Exit codes: 0 ok, 1 error, 2 wrong command line, 3 problems found (cluster check).
`

// adminCommands are the commands of strata admin by name.
var adminCommands = map[string]func(e *adminEnv, args []string) int{
	"topics":   runTopics,
	"describe": runDescribe,
	"create":   runCreate,
	"delete":   runDelete,
	"configs":  runConfigs,
	"alter":    runAlter,
	"tier":     runTier,
	"groups":   runGroups,
	"cluster":  runCluster,
	"broker":   runBroker,
	"reassign": runReassign,
	"restore":  runRestore,
}

// runAdmin is a small admin client over kadm, for operators without
// Kafka's own tools at hand (which work too).
func runAdmin(args []string) int {
	e := newAdminEnv()
	defer e.close()
	fs := e.newFlagSet("admin", adminUsage)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Print(adminUsage)
			return exitOK
		}
		return usageErr("%v (see strata admin --help)", err)
	}
	if fs.NArg() == 0 {
		fmt.Fprint(os.Stderr, adminUsage)
		return exitUsage
	}
	name := fs.Arg(0)
	if name == "help" {
		fmt.Print(adminUsage)
		return exitOK
	}
	run, ok := adminCommands[name]
	if !ok {
		return usageErr("unknown command %q (see strata admin --help)", name)
	}
	return run(e, fs.Args()[1:])
}

// subcommand dispatches args[0] among subs; def runs when args is empty
// (nil: the usage, exit 2).
func subcommand(e *adminEnv, what, usage string, args []string, subs map[string]func(*adminEnv, []string) int, def func(*adminEnv, []string) int) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		if def != nil {
			return def(e, args)
		}
		fmt.Fprint(os.Stderr, usage)
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Print(usage)
		return exitOK
	}
	run, ok := subs[args[0]]
	if !ok {
		names := make([]string, 0, len(subs))
		for n := range subs {
			names = append(names, n)
		}
		slices.Sort(names)
		return usageErr("%s: unknown command %q (%s)", what, args[0], strings.Join(names, ", "))
	}
	return run(e, args[1:])
}

func isHelp(a string) bool {
	return a == "-h" || a == "-help" || a == "--help" || a == "help"
}

// adminCtx is the deadline of a command's requests.
func adminCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// admClient is e's client as a kadm client, or an exit code.
func (e *adminEnv) adm() (*kadm.Client, int, bool) {
	cl, err := e.client()
	if err != nil {
		return nil, fail("%v", err), false
	}
	return kadm.NewClient(cl), 0, true
}

const topicsUsage = `usage: strata admin topics [list]
       strata admin topics describe [TOPIC...]

list prints the name of every topic, one a line (--json: an array).
describe is strata admin describe.
`

func runTopics(e *adminEnv, args []string) int {
	return subcommand(e, "topics", topicsUsage, args, map[string]func(*adminEnv, []string) int{
		"list":     listTopics,
		"describe": runDescribe,
	}, listTopics)
}

func listTopics(e *adminEnv, args []string) int {
	fs := e.newFlagSet("topics list", topicsUsage)
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return fail("topics: %v", err)
	}
	names := td.Names()
	if names == nil {
		names = []string{}
	}
	if e.json {
		return e.printJSON(names)
	}
	for _, n := range names {
		fmt.Fprintln(e.stdout, n)
	}
	return exitOK
}

const createUsage = `usage: strata admin create TOPIC [-p PARTITIONS] [-r REPLICATION_FACTOR] [-c key=value]...

Creates TOPIC with PARTITIONS partitions (default: the brokers'
num.partitions) of REPLICATION_FACTOR replicas (default:
default.replication.factor) and the topic configs given with -c
(repeatable), e.g. -c retention.ms=86400000 -c remote.storage.enable=true.
`

func runCreate(e *adminEnv, args []string) int {
	fs := e.newFlagSet("create", createUsage)
	parts := fs.Int("p", -1, "partitions (-1: num.partitions)")
	rf := fs.Int("r", -1, "replication factor (-1: default.replication.factor)")
	var cfgs stringList
	fs.Var(&cfgs, "c", "topic config key=value (repeatable)")
	pos, code, ok := parseArgs(fs, args, 1, 1)
	if !ok {
		return code
	}
	topic := pos[0]
	if *parts == 0 || *parts < -1 {
		return usageErr("create: -p %d: want a number of partitions, at least 1", *parts)
	}
	if *rf == 0 || *rf < -1 || *rf > 32767 {
		return usageErr("create: -r %d: want a replication factor, at least 1", *rf)
	}
	m := map[string]*string{}
	for _, kv := range cfgs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("create: -c %q: want key=value", kv)
		}
		m[k] = kadm.StringPtr(v)
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	r, err := adm.CreateTopic(ctx, int32(*parts), int16(*rf), m, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fail("create %s: %s%s", topic, errName(err), paren(r.ErrMessage))
	}
	if e.json {
		return e.printJSON(map[string]any{"created": topic, "partitions": r.NumPartitions, "replication_factor": r.ReplicationFactor})
	}
	fmt.Fprintf(e.stdout, "created %s\n", topic)
	return exitOK
}

const deleteUsage = `usage: strata admin delete TOPIC...

Deletes the topics named (their records too, in the bucket as well).
`

func runDelete(e *adminEnv, args []string) int {
	fs := e.newFlagSet("delete", deleteUsage)
	topics, code, ok := parseArgs(fs, args, 1, -1)
	if !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	rs, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fail("delete: %v", err)
	}
	code = exitOK
	var deleted []string
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "strata: delete %s: %s%s\n", r.Topic, errName(r.Err), paren(r.ErrMessage))
			code = exitError
			continue
		}
		deleted = append(deleted, r.Topic)
		if !e.json {
			fmt.Fprintf(e.stdout, "deleted %s\n", r.Topic)
		}
	}
	if e.json {
		if deleted == nil {
			deleted = []string{}
		}
		e.printJSON(map[string]any{"deleted": deleted})
	}
	return code
}

const describeUsage = `usage: strata admin describe [TOPIC...]

A row per partition of the topics named (every topic when none): its
leader, leader epoch, replicas, in-sync replicas, start and end offsets,
the bytes of its log on the leader's disk (LOCAL) and in the bucket
(REMOTE; "-" for a topic that is not tiered), and any error. An offset
that could not be listed shows as "-", with the error, never as a number;
the exit code is then 1.

REMOTE is the size of the partition's remote log as its leader's index
knows it: the .log bytes of the segments fully copied to the bucket
(their index objects not counted). A segment is both local and remote
between its upload and its local deletion (local.retention.*), so LOCAL
plus REMOTE can exceed the partition's size.
`

func runDescribe(e *adminEnv, args []string) int {
	fs := e.newFlagSet("describe", describeUsage)
	topics, code, ok := parseArgs(fs, args, 0, -1)
	if !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	return describe(ctx, adm, e, topics)
}

const configsUsage = `usage: strata admin configs TOPIC
       strata admin configs --broker ID
       strata admin configs --broker-default

Every config of a topic, of broker ID, or the cluster-wide dynamic
broker configs, with its value and source (DYNAMIC_TOPIC_CONFIG,
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG, DEFAULT_CONFIG); sensitive values show as
"(sensitive)". As kafka-configs --describe --all.
`

const alterUsage = `usage: strata admin alter TOPIC key=value|key=...
       strata admin alter --broker ID key=value|key=...
       strata admin alter --broker-default key=value|key=...

Sets (key=value) or deletes (key=, back to the default) configs of a
topic, of broker ID's dynamic configs, or of the cluster-wide dynamic
broker configs, with IncrementalAlterConfigs, as kafka-configs --alter
--add-config / --delete-config. A config the cluster does not know, or a
value it refuses, fails the whole command with the broker's reason.
`

// configTarget is what configs and alter act on.
type configTarget struct {
	topic   string
	broker  int32 // with isBroker
	isBrok  bool
	isDflt  bool
	display string
}

// parseConfigTarget reads the target of configs/alter from the flags and
// the first positional argument (consumed for a topic).
func parseConfigTarget(cmd string, broker string, dflt bool, pos []string) (configTarget, []string, int, bool) {
	var t configTarget
	switch {
	case broker != "" && dflt:
		return t, nil, usageErr("%s: --broker and --broker-default exclude each other", cmd), false
	case broker != "":
		id, err := strconv.ParseInt(broker, 10, 32)
		if err != nil || id < 0 {
			return t, nil, usageErr("%s: --broker %q is not a broker id", cmd, broker), false
		}
		t.broker, t.isBrok, t.display = int32(id), true, "broker "+broker
	case dflt:
		t.isDflt, t.display = true, "the cluster-wide broker defaults"
	default:
		if len(pos) == 0 {
			return t, nil, usageErr("%s: need a TOPIC, --broker ID or --broker-default (see --help)", cmd), false
		}
		t.topic, t.display, pos = pos[0], "topic "+pos[0], pos[1:]
	}
	return t, pos, 0, true
}

// configRow is a config in the output of configs.
type configRow struct {
	Key       string  `json:"key"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
}

func runConfigs(e *adminEnv, args []string) int {
	fs := e.newFlagSet("configs", configsUsage)
	broker := fs.String("broker", "", "describe broker ID's configs")
	dflt := fs.Bool("broker-default", false, "describe the cluster-wide dynamic broker configs")
	pos, code, ok := parseArgs(fs, args, 0, 1)
	if !ok {
		return code
	}
	t, pos, code, ok := parseConfigTarget("configs", *broker, *dflt, pos)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageErr("configs: unexpected argument %q (see --help)", pos[0])
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	var rcs kadm.ResourceConfigs
	var err error
	switch {
	case t.isBrok:
		rcs, err = adm.DescribeBrokerConfigs(ctx, t.broker)
	case t.isDflt:
		rcs, err = adm.DescribeBrokerConfigs(ctx)
	default:
		rcs, err = adm.DescribeTopicConfigs(ctx, t.topic)
	}
	if err == nil && len(rcs) != 1 {
		err = fmt.Errorf("%d answers, want 1", len(rcs))
	}
	if err == nil {
		err = rcs[0].Err
	}
	if err != nil {
		return fail("configs of %s: %s%s", t.display, errName(kadmErr(err)), paren(firstErrMessage(rcs)))
	}
	rows := []configRow{}
	for _, c := range rcs[0].Configs {
		r := configRow{Key: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive}
		if c.Sensitive {
			r.Value = nil
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	if e.json {
		return e.printJSON(rows)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, r := range rows {
		v := "(null)"
		switch {
		case r.Sensitive:
			v = "(sensitive)"
		case r.Value != nil:
			v = *r.Value
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Key, v, r.Source)
	}
	tw.Flush()
	return exitOK
}

func firstErrMessage(rcs kadm.ResourceConfigs) string {
	for _, rc := range rcs {
		if rc.ErrMessage != "" {
			return rc.ErrMessage
		}
	}
	return ""
}

func runAlter(e *adminEnv, args []string) int {
	fs := e.newFlagSet("alter", alterUsage)
	broker := fs.String("broker", "", "alter broker ID's dynamic configs")
	dflt := fs.Bool("broker-default", false, "alter the cluster-wide dynamic broker configs")
	pos, code, ok := parseArgs(fs, args, 0, -1)
	if !ok {
		return code
	}
	t, items, code, ok := parseConfigTarget("alter", *broker, *dflt, pos)
	if !ok {
		return code
	}
	if len(items) == 0 {
		return usageErr("alter: need key=value or key= items for %s (see --help)", t.display)
	}
	var ops []kadm.AlterConfig
	for _, kv := range items {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("alter: %q: want key=value or key=", kv)
		}
		if v == "" {
			ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		} else {
			ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
		}
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	var rs kadm.AlterConfigsResponses
	var err error
	switch {
	case t.isBrok:
		rs, err = adm.AlterBrokerConfigs(ctx, ops, t.broker)
	case t.isDflt:
		rs, err = adm.AlterBrokerConfigs(ctx, ops)
	default:
		rs, err = adm.AlterTopicConfigs(ctx, ops, t.topic)
	}
	if err != nil {
		return fail("alter %s: %v", t.display, kadmErr(err))
	}
	for _, r := range rs {
		if r.Err != nil {
			return fail("alter %s: %s%s", t.display, errName(r.Err), paren(r.ErrMessage))
		}
	}
	if e.json {
		return e.printJSON(map[string]any{"altered": t.display, "configs": items})
	}
	fmt.Fprintf(e.stdout, "altered %s\n", t.display)
	return exitOK
}

// describe writes the partitions of topics (of every topic when none)
// with their offsets and sizes and returns the exit code: 1 when a topic,
// a partition or an offset could not be described.
func describe(ctx context.Context, adm *kadm.Client, e *adminEnv, topics []string) int {
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fail("describe: %v", err)
	}
	starts, startErr := adm.ListStartOffsets(ctx, topics...)
	ends, endErr := adm.ListEndOffsets(ctx, topics...)
	sz, szErr := logSizes(ctx, adm, td)
	if szErr != nil {
		fmt.Fprintf(os.Stderr, "warning: sizes: %v\n", szErr)
	}
	rows, bad := describeRows(td, offsets{starts, startErr}, offsets{ends, endErr}, sz)
	if e.json {
		e.printJSON(rows)
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		writeDescribeRows(tw, rows)
		tw.Flush()
	}
	if bad > 0 {
		return fail("describe: errors in %d row(s), see ERROR", bad)
	}
	return 0
}

// sizes are the bytes of each partition's log on its leader's disk and
// in the bucket, as the leader reports them in DescribeLogDirs (its
// second, remote log dir lists the tiered partitions it leads).
type sizes struct {
	local, remote map[partKey]int64
}

// logSizes asks the brokers for the sizes of the partitions of td.
func logSizes(ctx context.Context, adm *kadm.Client, td kadm.TopicDetails) (sizes, error) {
	sz := sizes{local: map[partKey]int64{}, remote: map[partKey]int64{}}
	var set kadm.TopicsSet
	leader := map[partKey]int32{}
	for _, t := range td {
		for _, p := range t.Partitions {
			set.Add(t.Topic, p.Partition)
			leader[partKey{t.Topic, p.Partition}] = p.Leader
		}
	}
	if len(set) == 0 {
		return sz, nil
	}
	all, err := adm.DescribeAllLogDirs(ctx, set)
	for b, dirs := range all {
		for _, d := range dirs {
			if d.Err != nil {
				continue
			}
			remote := strings.Contains(d.Dir, "://")
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				k := partKey{p.Topic, p.Partition}
				if leader[k] != b {
					return
				}
				if remote {
					sz.remote[k] += p.Size
				} else {
					sz.local[k] += p.Size
				}
			})
		}
	}
	return sz, err
}

// describeRow is a partition in the output of describe.
type describeRow struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Start       *int64  `json:"start_offset"`
	End         *int64  `json:"end_offset"`
	LocalBytes  *int64  `json:"local_bytes"`
	RemoteBytes *int64  `json:"remote_bytes"`
	Error       string  `json:"error,omitempty"`
	topicOnly   bool
}

// describeRows builds a row per partition, and a row per topic that
// could not be described. An offset that could not be listed is null,
// with its error, never a number. Errors are shown by their Kafka names.
// It returns the rows and how many have an error.
func describeRows(td kadm.TopicDetails, starts, ends offsets, sz sizes) ([]describeRow, int) {
	rows := []describeRow{}
	bad := 0
	for _, t := range td.Sorted() {
		if t.Err != nil {
			bad++
			rows = append(rows, describeRow{Topic: t.Topic, Partition: -1, Leader: -1, Error: errName(t.Err), topicOnly: true})
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			var errs []string
			if p.Err != nil {
				errs = append(errs, errName(p.Err))
			}
			offset := func(what string, l offsets) *int64 {
				o, ok := l.Lookup(t.Topic, p.Partition)
				if ok && o.Err == nil {
					return &o.Offset
				}
				_, err := l.lookup(t.Topic, p.Partition)
				errs = append(errs, what+": "+errName(err))
				return nil
			}
			r := describeRow{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, Start: offset("START", starts), End: offset("END", ends)}
			k := partKey{t.Topic, p.Partition}
			if n, ok := sz.local[k]; ok {
				r.LocalBytes = &n
			}
			if n, ok := sz.remote[k]; ok {
				r.RemoteBytes = &n
			}
			if len(errs) > 0 {
				bad++
				r.Error = strings.Join(errs, ", ")
			}
			rows = append(rows, r)
		}
	}
	return rows, bad
}

// writeDescribeRows writes the table of describe.
func writeDescribeRows(w io.Writer, rows []describeRow) {
	fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND\tLOCAL\tREMOTE\tERROR")
	for _, r := range rows {
		if r.topicOnly {
			fmt.Fprintf(w, "%s\t\t\t\t\t\t\t\t\t\t%s\n", r.Topic, r.Error)
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%v\t%v\t%s\t%s\t%s\t%s\t%s\n", r.Topic, r.Partition, r.Leader, r.LeaderEpoch, r.Replicas, r.ISR,
			num(r.Start), num(r.End), size(r.LocalBytes), size(r.RemoteBytes), r.Error)
	}
}

// writeDescribe writes the table of describe for td and returns the
// number of rows with an error.
func writeDescribe(w io.Writer, td kadm.TopicDetails, starts, ends offsets, sz sizes) int {
	rows, bad := describeRows(td, starts, ends, sz)
	writeDescribeRows(w, rows)
	return bad
}

// num is *n, or "-" for nil.
func num(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

// size is *n in human units, or "-" for nil.
func size(n *int64) string {
	if n == nil {
		return "-"
	}
	return humanBytes(*n)
}

// offsets is the answer of kadm's ListStartOffsets or ListEndOffsets.
type offsets struct {
	kadm.ListedOffsets
	err error // a request's error, for the partitions it left out
}

// lookup returns partition p of topic t as its offset or, when it could
// not be listed, "-" and the error.
func (l offsets) lookup(t string, p int32) (string, error) {
	o, ok := l.Lookup(t, p)
	switch {
	case ok && o.Err == nil:
		return strconv.FormatInt(o.Offset, 10), nil
	case ok:
		return "-", o.Err
	}
	// The shard of the request that asked for p failed.
	if se, ok := errors.AsType[*kadm.ShardErrors](l.err); ok {
		for _, e := range se.Errs {
			if req, ok := e.Req.(*kmsg.ListOffsetsRequest); ok && asksFor(req, t, p) {
				return "-", e.Err
			}
		}
	}
	if l.err != nil {
		return "-", l.err
	}
	return "-", errors.New("not listed")
}

// asksFor reports whether req lists partition p of topic t.
func asksFor(req *kmsg.ListOffsetsRequest, t string, p int32) bool {
	for _, rt := range req.Topics {
		if rt.Topic != t {
			continue
		}
		for _, rp := range rt.Partitions {
			if rp.Partition == p {
				return true
			}
		}
	}
	return false
}

// errName is a Kafka error's name as Kafka spells it today
// (NOT_LEADER_OR_FOLLOWER; kerr keeps code 6's name from before Kafka 2.7),
// or any other error's text.
func errName(err error) string {
	ke, ok := errors.AsType[*kerr.Error](err)
	switch {
	case !ok:
		return err.Error()
	case ke == kerr.NotLeaderForPartition:
		return "NOT_LEADER_OR_FOLLOWER"
	}
	return ke.Message
}
