package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const adminUsage = `usage: strata admin [--bootstrap HOST:PORT] <command> [args]

commands:
  topics                               list topics
  create TOPIC [-p N] [-r N] [-c k=v]  create a topic
  delete TOPIC...                      delete topics
  describe TOPIC...                    partitions, leaders and offsets
  configs TOPIC                        every topic config with its value and source
  alter TOPIC k=v|k=...                set (k=v) or delete (k=) topic configs
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*bootstrap, ",")...))
	if err != nil {
		return fail("%v", err)
	}
	defer cl.Close()
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
		td, err := adm.ListTopics(ctx, rest...)
		if err != nil {
			return fail("%v", err)
		}
		starts, _ := adm.ListStartOffsets(ctx, rest...)
		ends, _ := adm.ListEndOffsets(ctx, rest...)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND\tERROR")
		for _, t := range td.Sorted() {
			if t.Err != nil {
				fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\t%v\n", t.Topic, t.Err)
				continue
			}
			for _, p := range t.Partitions.Sorted() {
				s, _ := starts.Lookup(t.Topic, p.Partition)
				e, _ := ends.Lookup(t.Topic, p.Partition)
				errS := ""
				if p.Err != nil {
					errS = p.Err.Error()
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\t%v\t%d\t%d\t%s\n", t.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, s.Offset, e.Offset, errS)
			}
		}
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
