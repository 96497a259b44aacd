package main

// strata admin reassign status / cancel: the partition reassignments in
// progress (ListPartitionReassignments, AlterPartitionReassignments with
// null replicas), whoever started them: strata admin cluster rebalance,
// kafka-reassign-partitions, kadm.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const reassignUsage = `usage: strata admin reassign status
       strata admin reassign cancel [--preserve-throttles] [TOPIC[:PARTITION]...]

status lists every partition reassignment in progress: its replicas
(original and target), the replicas being added and removed, and how far
each adding replica is behind its leader (BEHIND, broker:bytes, from the
leader's and the replica's local log sizes; for a tiered topic the new
replica copies only what is not yet in the bucket, so this is an upper
bound).

cancel stops the reassignments of the partitions named (a TOPIC alone:
every partition of it being reassigned; none: all of them), which go back
to their original replicas; the replicas being added are deleted. Once no
reassignment is left, the replication throttles a rebalance or
decommission set are cleared, as kafka-reassign-partitions --cancel does,
unless --preserve-throttles.
`

// runReassign runs strata admin reassign.
func runReassign(e *adminEnv, args []string) int {
	return subcommand(e, "reassign", reassignUsage, args, map[string]func(*adminEnv, []string) int{
		"status": func(e *adminEnv, args []string) int {
			fs := e.newFlagSet("reassign status", reassignUsage)
			if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
				return code
			}
			if code, ok := e.noJSON("reassign status"); !ok {
				return code
			}
			cl, err := e.client()
			if err != nil {
				return fail("%v", err)
			}
			ctx, cancel := adminCtx()
			defer cancel()
			return reassignStatus(ctx, cl, e.stdout)
		},
		"cancel": func(e *adminEnv, args []string) int {
			fs := e.newFlagSet("reassign cancel", reassignUsage)
			preserve := fs.Bool("preserve-throttles", false, "leave the replication throttles in place")
			names, code, ok := parseArgs(fs, args, 0, -1)
			if !ok {
				return code
			}
			if code, ok := e.noJSON("reassign cancel"); !ok {
				return code
			}
			cl, err := e.client()
			if err != nil {
				return fail("%v", err)
			}
			ctx, cancel := adminCtx()
			defer cancel()
			return reassignCancel(ctx, cl, e.stdout, names, *preserve)
		},
	}, nil)
}

// listReassignments lists every reassignment in progress: a
// ListPartitionReassignments with a null topic list, which kadm does not
// send (it sends nothing for an empty set).
func listReassignments(ctx context.Context, cl *kgo.Client) (kadm.ListPartitionReassignmentsResponses, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 15000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
			return nil, fmt.Errorf("%s (%s)", errName(err), *resp.ErrorMessage)
		}
		return nil, errors.New(errName(err))
	}
	out := kadm.ListPartitionReassignmentsResponses{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if out[t.Topic] == nil {
				out[t.Topic] = map[int32]kadm.ListPartitionReassignmentsResponse{}
			}
			out[t.Topic][p.Partition] = kadm.ListPartitionReassignmentsResponse{Topic: t.Topic, Partition: p.Partition,
				Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas}
		}
	}
	return out, nil
}

// reassignStatus writes the table of reassign status.
func reassignStatus(ctx context.Context, cl *kgo.Client, w io.Writer) int {
	ra, err := listReassignments(ctx, cl)
	if err != nil {
		return fail("reassign status: %v", err)
	}
	if len(ra) == 0 {
		fmt.Fprintln(w, "no reassignment in progress")
		return 0
	}
	behind, _ := addingBehind(ctx, kadm.NewClient(cl), ra) // optional: "-" when unknown
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING\tBEHIND")
	for _, r := range ra.Sorted() {
		var bs []string
		for _, a := range r.AddingReplicas {
			if n, ok := behind[tpb{r.Topic, r.Partition, a}]; ok {
				bs = append(bs, fmt.Sprintf("%d:%s", a, humanBytes(n)))
			} else {
				bs = append(bs, fmt.Sprintf("%d:-", a))
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t%s\n", r.Topic, r.Partition, r.Replicas, r.AddingReplicas, r.RemovingReplicas, strings.Join(bs, " "))
	}
	tw.Flush()
	return 0
}

// tpb is a replica: a partition on a broker.
type tpb struct {
	topic     string
	partition int32
	broker    int32
}

// addingBehind tells, for each adding replica of ra, how many bytes its
// local log is short of its leader's (DescribeLogDirs of the brokers
// involved, the local directory only), as far as it can.
func addingBehind(ctx context.Context, adm *kadm.Client, ra kadm.ListPartitionReassignmentsResponses) (map[tpb]int64, error) {
	out := map[tpb]int64{}
	if len(ra) == 0 {
		return out, nil
	}
	var set kadm.TopicsSet
	ra.Each(func(r kadm.ListPartitionReassignmentsResponse) { set.Add(r.Topic, r.Partition) })
	md, err := adm.Metadata(ctx, set.Topics()...)
	if err != nil {
		return out, err
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	size := func(b int32, t string, p int32) (int64, bool) {
		for _, d := range dirs[b] {
			if strings.Contains(d.Dir, "://") || d.Err != nil { // the remote tier's entry
				continue
			}
			if dp, ok := d.Topics.Lookup(t, p); ok {
				return dp.Size, true
			}
		}
		return 0, false
	}
	ra.Each(func(r kadm.ListPartitionReassignmentsResponse) {
		leader := int32(-1)
		if pd, ok := md.Topics[r.Topic].Partitions[r.Partition]; ok {
			leader = pd.Leader
		}
		ls, ok := size(leader, r.Topic, r.Partition)
		if !ok {
			return
		}
		for _, a := range r.AddingReplicas {
			as, _ := size(a, r.Topic, r.Partition) // none yet: all of it
			out[tpb{r.Topic, r.Partition, a}] = max(0, ls-as)
		}
	})
	return out, err
}

// humanBytes formats n as 1.5 MB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// parsePartitions parses TOPIC[:PARTITION] arguments into the topics
// named whole and the partitions named.
func parsePartitions(args []string) (whole []string, parts kadm.TopicsSet, err error) {
	for _, a := range args {
		t, p, hasP := strings.Cut(a, ":")
		if t == "" {
			return nil, nil, fmt.Errorf("%q: want TOPIC or TOPIC:PARTITION", a)
		}
		if !hasP {
			whole = append(whole, t)
			continue
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("%q: partition %q is not a number", a, p)
		}
		parts.Add(t, int32(n))
	}
	return whole, parts, nil
}

// reassignCancel cancels the reassignments named (all when none) and
// writes each outcome.
func reassignCancel(ctx context.Context, cl *kgo.Client, w io.Writer, names []string, preserve bool) int {
	whole, parts, err := parsePartitions(names)
	if err != nil {
		return fail("reassign cancel: %v", err)
	}
	ra, err := listReassignments(ctx, cl)
	if err != nil {
		return fail("reassign cancel: %v", err)
	}
	code := 0
	var req kadm.AlterPartitionAssignmentsReq
	if len(names) == 0 {
		ra.Each(func(r kadm.ListPartitionReassignmentsResponse) { req.CancelAssign(r.Topic, r.Partition) })
	}
	for _, t := range whole {
		if len(ra[t]) == 0 {
			fmt.Fprintf(os.Stderr, "cancel %s: NO_REASSIGNMENT_IN_PROGRESS\n", t)
			code = 1
		}
		for p := range ra[t] {
			req.CancelAssign(t, p)
		}
	}
	parts.Each(func(t string, p int32) { req.CancelAssign(t, p) })
	if len(names) == 0 && len(req) == 0 {
		fmt.Fprintln(w, "no reassignment in progress")
	}
	if len(req) > 0 {
		rs, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
		if err != nil {
			return fail("reassign cancel: %v", kadmErr(err))
		}
		for _, r := range rs.Sorted() {
			if r.Err != nil {
				fmt.Fprintf(os.Stderr, "cancel %s-%d: %s%s\n", r.Topic, r.Partition, errName(r.Err), paren(r.ErrMessage))
				code = 1
				continue
			}
			fmt.Fprintf(w, "cancelled %s-%d\n", r.Topic, r.Partition)
		}
	}
	if preserve {
		return code
	}
	if left, err := listReassignments(ctx, cl); err != nil || len(left) > 0 {
		return code // throttles stay while anything moves
	}
	cleared, err := clearThrottles(ctx, kadm.NewClient(cl), nil, nil)
	if err != nil {
		return fail("reassign cancel: clear replication throttles: %v", err)
	}
	if cleared != "" {
		fmt.Fprintf(w, "cleared replication throttles: %s\n", cleared)
	}
	return code
}

// paren is " (msg)", or "" for an empty msg.
func paren(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

// kadmErr names a Kafka error inside kadm's wrapping.
func kadmErr(err error) error {
	var em *kadm.ErrAndMessage
	if errors.As(err, &em) {
		return fmt.Errorf("%s%s", errName(em.Err), paren(em.ErrMessage))
	}
	if _, ok := errors.AsType[*kerr.Error](err); ok {
		return errors.New(errName(err))
	}
	return err
}
