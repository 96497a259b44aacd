package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const adminUsage = `usage: strata admin [--bootstrap HOST:PORT] <command> [args]

commands:
  topics                               list topics
  create TOPIC [-p N] [-r N] [-c k=v]  create a topic
  delete TOPIC...                      delete topics
  describe TOPIC...                    partitions, leaders and offsets
  configs TOPIC                        every topic config with its value and source
  alter TOPIC k=v|k=...                set (k=v) or delete (k=) topic configs
  cluster drain [--timeout D]          refuse writes and upload everything to the bucket (scale to zero)
  cluster resume                       accept writes again after a drain
  cluster rebalance [--execute] [--throttle B] [--topics A,B]
                                       spread replicas and leaders evenly over the live brokers
  broker decommission ID [--execute] [--throttle B]
                                       move every replica off broker ID before it stops
  reassign status                      the partition reassignments in progress
  reassign cancel [TOPIC[:PARTITION]...]
                                       cancel reassignments (all when none named)
  restore --zookeeper Z --tier URL     bring a cluster back from its bucket alone
`

// runAdmin is a small admin client over kadm, for operators without
// Kafka's own tools at hand (which work too).
func runAdmin(args []string) int {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "a broker's HOST:PORT")
	fs.Usage = func() { fmt.Fprint(os.Stderr, adminUsage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if fs.Arg(0) == "restore" { // scale.go
		return runRestore(*bootstrap, fs.Args()[1:])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*bootstrap, ",")...))
	if err != nil {
		return fail("%v", err)
	}
	defer cl.Close()
	if fs.Arg(0) == "cluster" && fs.NArg() > 1 { // scale.go
		switch fs.Arg(1) {
		case "drain":
			return clusterDrain(cl, fs.Args()[2:])
		case "resume":
			return clusterResume(cl)
		case "rebalance": // admin_rebalance.go
			return clusterRebalance(cl, fs.Args()[2:])
		}
	}
	switch fs.Arg(0) { // admin_reassign.go, admin_rebalance.go
	case "reassign":
		return runReassign(cl, fs.Args()[1:])
	case "broker":
		if fs.NArg() > 1 && fs.Arg(1) == "decommission" {
			return brokerDecommission(cl, fs.Args()[2:])
		}
		return fail("broker: unknown command (decommission)")
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch cmd {
	case "topics":
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return fail("%v", err)
		}
		for _, n := range td.Names() {
			fmt.Fprintln(tw, n)
		}
	case "create":
		cf := flag.NewFlagSet("create", flag.ContinueOnError)
		parts := cf.Int("p", -1, "partitions (-1: num.partitions)")
		rf := cf.Int("r", -1, "replication factor (-1: default.replication.factor)")
		var cfgs stringList
		cf.Var(&cfgs, "c", "topic config key=value (repeatable)")
		if len(rest) == 0 {
			return fail("create: need a topic name")
		}
		if err := cf.Parse(rest[1:]); err != nil {
			return 2
		}
		m := map[string]*string{}
		for _, kv := range cfgs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fail("create: -c %q: want key=value", kv)
			}
			m[k] = kadm.StringPtr(v)
		}
		r, err := adm.CreateTopic(ctx, int32(*parts), int16(*rf), m, rest[0])
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return fail("create %s: %v", rest[0], err)
		}
		fmt.Fprintf(tw, "created %s\n", rest[0])
	case "delete":
		rs, err := adm.DeleteTopics(ctx, rest...)
		if err != nil {
			return fail("%v", err)
		}
		code := 0
		for _, r := range rs.Sorted() {
			if r.Err != nil {
				fmt.Fprintf(os.Stderr, "delete %s: %v\n", r.Topic, r.Err)
				code = 1
				continue
			}
			fmt.Fprintf(tw, "deleted %s\n", r.Topic)
		}
		return code
	case "describe":
		return describe(ctx, adm, os.Stdout, rest)
	case "configs":
		if len(rest) != 1 {
			return fail("configs: need one topic")
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, rest[0])
		if err != nil {
			return fail("%v", err)
		}
		rc, err := rcs.On(rest[0], nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return fail("configs %s: %v", rest[0], err)
		}
		sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Key < rc.Configs[j].Key })
		fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
		for _, c := range rc.Configs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Key, c.MaybeValue(), c.Source)
		}
	case "alter":
		if len(rest) < 2 {
			return fail("alter: need a topic and key=value items")
		}
		var ops []kadm.AlterConfig
		for _, kv := range rest[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fail("alter: %q: want key=value or key=", kv)
			}
			if v == "" {
				ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			} else {
				ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
			}
		}
		rs, err := adm.AlterTopicConfigs(ctx, ops, rest[0])
		if err != nil {
			return fail("%v", err)
		}
		for _, r := range rs {
			if r.Err != nil {
				return fail("alter %s: %v (%s)", r.Name, r.Err, r.ErrMessage)
			}
		}
		fmt.Fprintf(tw, "altered %s\n", rest[0])
	default:
		fs.Usage()
		return 2
	}
	return 0
}

// describe writes the partitions of topics (of every topic when none)
// with their offsets to w and returns the exit code: 1 when a topic, a
// partition or an offset could not be described.
func describe(ctx context.Context, adm *kadm.Client, w io.Writer, topics []string) int {
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fail("%v", err)
	}
	starts, startErr := adm.ListStartOffsets(ctx, topics...)
	ends, endErr := adm.ListEndOffsets(ctx, topics...)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	bad := writeDescribe(tw, td, offsets{starts, startErr}, offsets{ends, endErr})
	tw.Flush()
	if bad > 0 {
		return fail("describe: errors in %d row(s), see ERROR", bad)
	}
	return 0
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

// writeDescribe writes the table of describe: a row per partition with its
// leader, epoch, replicas, ISR and start and end offsets, and a row per
// topic that could not be described. An offset that could not be listed
// shows as "-", with its error in the ERROR column, never as a number.
// Errors are shown by their Kafka names. It returns the number of rows
// with an error.
func writeDescribe(w io.Writer, td kadm.TopicDetails, starts, ends offsets) int {
	bad := 0
	fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND\tERROR")
	for _, t := range td.Sorted() {
		if t.Err != nil {
			bad++
			fmt.Fprintf(w, "%s\t\t\t\t\t\t\t\t%s\n", t.Topic, errName(t.Err))
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			var errs []string
			if p.Err != nil {
				errs = append(errs, errName(p.Err))
			}
			offset := func(what string, l offsets) string {
				o, err := l.lookup(t.Topic, p.Partition)
				if err != nil {
					errs = append(errs, what+": "+errName(err))
				}
				return o
			}
			start, end := offset("START", starts), offset("END", ends)
			if len(errs) > 0 {
				bad++
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%v\t%v\t%s\t%s\t%s\n", t.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, start, end, strings.Join(errs, ", "))
		}
	}
	return bad
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
