package main

// strata admin cluster rebalance and broker decommission: compute a plan
// (admin_plan.go), print it, and with --execute carry it out through
// AlterPartitionReassignments under Kafka's replication throttles, as
// kafka-reassign-partitions --generate / --execute / --verify do.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const rebalanceUsage = `usage: strata admin cluster rebalance [--execute] [--throttle BYTES_PER_SEC] [--topics A,B] [--timeout D]

Computes a plan that spreads the replicas, and the preferred leaders
(first replicas), of every topic (or of --topics) evenly over the live
brokers with the fewest replicas copied: each partition keeps its
replication factor, never two replicas on one broker, existing replicas
stay where they can, and when every broker has a broker.rack no move
lowers the racks a partition spans. Replicas on brokers that are not
live move too. It prints the plan (partition: current -> target) and
the totals, with the bytes to copy: the adding replicas copy their
leader's local log (for a tiered topic only the tail not yet in the
bucket, which stays where it is). Without --execute nothing moves (a dry
run).

--execute submits the plan with AlterPartitionReassignments and shows one
progress line on stderr (partitions and bytes left, copy rate, time
left) until it is done, then elects the preferred leaders. --throttle sets Kafka's replication
throttles while it moves, as kafka-reassign-partitions does: the
dynamic broker configs leader.replication.throttled.rate and
follower.replication.throttled.rate on the brokers involved, the topic
configs leader.replication.throttled.replicas (the existing replicas)
and follower.replication.throttled.replicas (the adding ones); they are
cleared when the move completes.
`

const decommissionUsage = `usage: strata admin broker decommission ID [--execute] [--throttle BYTES_PER_SEC] [--timeout D]

Computes a plan that moves every replica off broker ID onto the other
live brokers, each to the one holding the fewest replicas (racks kept
apart as cluster rebalance does); only the replicas on broker ID move.
It refuses when the other brokers cannot hold a partition's replication
factor. Without --execute it prints the plan only. With --execute it
carries it out (see cluster rebalance), waits until broker ID has
deleted its partition directories, and reports that it may be stopped.
A broker id that is neither live nor holds a replica is an error.
`

// clusterRebalance runs strata admin cluster rebalance.
func clusterRebalance(e *adminEnv, args []string) int {
	fs := e.newFlagSet("cluster rebalance", rebalanceUsage)
	var opt execOptions
	opt.flags(fs)
	topics := fs.String("topics", "", "comma-separated topics to rebalance (default: every topic)")
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	if code, ok := e.noJSON("cluster rebalance"); !ok {
		return code
	}
	cl, err := e.client()
	if err != nil {
		return fail("%v", err)
	}
	var only []string
	for t := range strings.SplitSeq(*topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			only = append(only, t)
		}
	}
	return planAndRun(cl, "cluster rebalance", only, planOptions{Balance: true}, opt, -1)
}

// brokerDecommission runs strata admin broker decommission.
func brokerDecommission(e *adminEnv, args []string) int {
	fs := e.newFlagSet("broker decommission", decommissionUsage)
	var opt execOptions
	opt.flags(fs)
	pos, code, ok := parseArgs(fs, args, 1, 1)
	if !ok {
		return code
	}
	id, err := strconv.ParseInt(pos[0], 10, 32)
	if err != nil || id < 0 {
		return usageErr("broker decommission: %q is not a broker id", pos[0])
	}
	if code, ok := e.noJSON("broker decommission"); !ok {
		return code
	}
	cl, err := e.client()
	if err != nil {
		return fail("%v", err)
	}
	return planAndRun(cl, "broker decommission", nil, planOptions{Remove: []int32{int32(id)}}, opt, int32(id))
}

// partKey is a partition.
type partKey struct {
	topic     string
	partition int32
}

// execOptions are the flags of a plan's execution.
type execOptions struct {
	execute  bool
	throttle int64
	timeout  time.Duration
}

func (o *execOptions) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.execute, "execute", false, "carry the plan out (default: print it only)")
	fs.Int64Var(&o.throttle, "throttle", 0, "replication throttle in bytes per second while moving (0: none)")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "how long --execute waits for the moves")
}

// planAndRun plans over the current assignment of topics (every topic
// when nil), prints the plan, and executes it when asked. decommission
// is the broker being emptied, or -1.
func planAndRun(cl *kgo.Client, what string, topics []string, popt planOptions, opt execOptions, decommission int32) int {
	if opt.throttle < 0 {
		return fail("%s: --throttle %d: want bytes per second, 0 for none", what, opt.throttle)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	ra, err := listReassignments(mctx, cl)
	if err != nil {
		return fail("%s: list reassignments: %v", what, err)
	}
	if n := countReassignments(ra); n > 0 {
		return fail("%s: %d partition reassignments in progress (strata admin reassign status): wait for them or cancel them", what, n)
	}
	parts, brokers, err := currentAssignment(mctx, adm, topics)
	if err != nil {
		return fail("%s: %v", what, err)
	}
	if decommission >= 0 {
		holds := false
		for _, p := range parts {
			holds = holds || slices.Contains(p.Replicas, decommission)
		}
		live := slices.ContainsFunc(brokers, func(b planBroker) bool { return b.ID == decommission })
		switch {
		case !holds && !live:
			var ids []int32
			for _, b := range brokers {
				ids = append(ids, b.ID)
			}
			slices.Sort(ids)
			return fail("broker decommission: broker %d is not in the cluster: it is not live (live brokers: %s) and holds no replicas", decommission, idList(ids))
		case !holds:
			fmt.Printf("broker %d holds no replicas; it may be stopped\n", decommission)
			return 0
		}
	}
	p, err := computePlan(parts, brokers, popt)
	if err != nil {
		return fail("%s: %v", what, err)
	}
	var live []int32
	for _, b := range brokers {
		live = append(live, b.ID)
	}
	writePlan(os.Stdout, p, live)
	if n := p.Copies(); n > 0 {
		if b, err := planBytes(mctx, adm, p); err != nil {
			fmt.Printf("to copy: unknown (%v)\n", err)
		} else {
			fmt.Printf("to copy: about %s (%d replicas, each the local log of its leader; tiered history stays in the bucket)\n", humanBytes(b), n)
		}
	}
	if len(p.Moves) == 0 {
		if decommission < 0 {
			fmt.Println("balanced already: nothing to move")
		}
		return 0
	}
	if !opt.execute {
		fmt.Println("dry run: nothing moved; run again with --execute to carry the plan out")
		return 0
	}
	if code := executePlan(ctx, cl, what, p, opt); code != 0 {
		return code
	}
	if decommission >= 0 {
		return awaitEmpty(ctx, adm, decommission)
	}
	return 0
}

func countReassignments(ra kadm.ListPartitionReassignmentsResponses) int {
	n := 0
	ra.Each(func(kadm.ListPartitionReassignmentsResponse) { n++ })
	return n
}

// currentAssignment reads the replicas of every partition of topics
// (every topic when nil) and the live brokers from metadata.
func currentAssignment(ctx context.Context, adm *kadm.Client, topics []string) ([]planPartition, []planBroker, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("metadata: %w", err)
	}
	var parts []planPartition
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			return nil, nil, fmt.Errorf("topic %s: %s", t.Topic, errName(t.Err))
		}
		for _, pd := range t.Partitions.Sorted() {
			parts = append(parts, planPartition{Topic: t.Topic, Partition: pd.Partition, Replicas: slices.Clone(pd.Replicas)})
		}
	}
	var brokers []planBroker
	for _, b := range md.Brokers {
		pb := planBroker{ID: b.NodeID}
		if b.Rack != nil {
			pb.Rack = *b.Rack
		}
		brokers = append(brokers, pb)
	}
	if len(parts) == 0 {
		return nil, nil, fmt.Errorf("no topics to move")
	}
	return parts, brokers, nil
}

// writePlan writes the moves of p and its totals; live are the live
// brokers, so that the others can be named.
func writePlan(w io.Writer, p plan, live []int32) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(p.Moves) > 0 {
		fmt.Fprintln(tw, "PARTITION\tCURRENT\t\tTARGET\tCOPIES")
	}
	for _, m := range p.Moves {
		var what []string
		for _, a := range m.Adding() {
			what = append(what, fmt.Sprintf("+%d", a))
		}
		for _, r := range m.Removing() {
			what = append(what, fmt.Sprintf("-%d", r))
		}
		if len(what) == 0 {
			what = append(what, "preferred leader only")
		}
		fmt.Fprintf(tw, "%s-%d\t%v\t->\t%v\t%s\n", m.Topic, m.Partition, m.From, m.To, strings.Join(what, " "))
	}
	tw.Flush()
	fmt.Fprintf(w, "plan: %d partitions change, %d replicas copied, %d preferred leaders change\n", len(p.Moves), p.Copies(), p.LeaderChanges())
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tREPLICAS\tLEADERS\t")
	for _, b := range p.Brokers {
		note := ""
		if !slices.Contains(live, b) {
			note = "not live"
		}
		be, af := p.Before[b], p.After[b]
		fmt.Fprintf(tw, "%d\t%d -> %d\t%d -> %d\t%s\n", b, be.Replicas, af.Replicas, be.Leaders, af.Leaders, note)
	}
	tw.Flush()
}

// executePlan submits p, throttled when asked, waits for it showing
// progress on stderr, clears the throttles, and elects the preferred
// leaders.
func executePlan(ctx context.Context, cl *kgo.Client, what string, p plan, opt execOptions) int {
	adm := kadm.NewClient(cl)
	var th throttles
	if opt.throttle > 0 {
		th = planThrottles(p)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := th.set(sctx, adm, opt.throttle)
		cancel()
		if err != nil {
			th.clearLogged(adm)
			return fail("%s: set replication throttles: %v", what, err)
		}
		fmt.Fprintf(os.Stderr, "throttled at %d bytes/s: brokers %s; topics %s\n", opt.throttle, idList(th.brokers), strings.Join(th.topicNames(), ", "))
	}
	var req kadm.AlterPartitionAssignmentsReq
	target := map[partKey][]int32{}
	for _, m := range p.Moves {
		req.Assign(m.Topic, m.Partition, m.To)
		target[partKey{m.Topic, m.Partition}] = m.To
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	rs, err := adm.AlterPartitionAssignments(sctx, req)
	cancel()
	if err != nil {
		th.clearLogged(adm)
		return fail("%s: alter partition reassignments: %v", what, kadmErr(err))
	}
	code := 0
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "reassign %s-%d: %s%s\n", r.Topic, r.Partition, errName(r.Err), paren(r.ErrMessage))
			delete(target, partKey{r.Topic, r.Partition})
			code = 1
		}
	}
	began := time.Now()
	prog := newProgress(os.Stderr)
	defer prog.done()
	mp := &moveProgress{began: began, partitions: len(target), firstBytes: -1}
	deadline := time.NewTimer(opt.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// Done when no partition of the plan is listed as moving and the
	// metadata shows every target (it follows the controller shortly).
	var settled time.Time
	for len(target) > 0 {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		left, bytesLeft, err := progress(lctx, cl, target)
		var bad []string
		if err == nil && left == 0 {
			if bad = checkTargets(lctx, adm, target); len(bad) == 0 {
				cancel()
				break
			}
			if settled.IsZero() {
				settled = time.Now()
			} else if time.Since(settled) > 30*time.Second {
				cancel()
				th.clearLogged(adm)
				prog.done()
				return fail("%s: after the moves: %s", what, firstFew(bad, 3))
			}
		}
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			prog.update(fmt.Sprintf("  %v (retrying)", err), "error")
		case err == nil && left > 0:
			text, key := mp.line(left, bytesLeft, time.Now())
			prog.update("  "+text, key)
		case err == nil:
			prog.update(fmt.Sprintf("  moved; waiting for the metadata to show the new replicas of %d partitions (%v)", len(bad), time.Since(began).Round(time.Second)), "waiting")
		}
		select {
		case <-ctx.Done():
			prog.done()
			return fail("%s: interrupted; the moves go on (strata admin reassign status); the replication throttles stay until strata admin reassign cancel", what)
		case <-deadline.C:
			prog.done()
			return fail("%s: not done within %v: %d partitions still moving (strata admin reassign status); the replication throttles stay until strata admin reassign cancel", what, opt.timeout, left)
		case <-tick.C:
		}
	}
	prog.done()
	if len(th.brokers) > 0 {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := th.clear(cctx, adm)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "warning: clear replication throttles: %v\n", err)
			code = 1
		} else {
			fmt.Fprintln(os.Stderr, "cleared the replication throttles")
		}
	}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	electPreferred(ectx, adm, target)
	fmt.Printf("done: %d partitions moved in %v\n", len(target), time.Since(began).Round(time.Millisecond))
	return code
}

// progress counts the partitions of target still being reassigned and
// the bytes their adding replicas lack (-1 when unknown).
func progress(ctx context.Context, cl *kgo.Client, target map[partKey][]int32) (left int, bytesLeft int64, err error) {
	ra, err := listReassignments(ctx, cl)
	if err != nil {
		return 0, -1, err
	}
	ours := kadm.ListPartitionReassignmentsResponses{}
	ra.Each(func(r kadm.ListPartitionReassignmentsResponse) {
		if _, ok := target[partKey{r.Topic, r.Partition}]; ok {
			if ours[r.Topic] == nil {
				ours[r.Topic] = map[int32]kadm.ListPartitionReassignmentsResponse{}
			}
			ours[r.Topic][r.Partition] = r
			left++
		}
	})
	if left == 0 {
		return 0, 0, nil
	}
	behind, berr := addingBehind(ctx, kadm.NewClient(cl), ours)
	bytesLeft = 0
	n := 0
	ours.Each(func(r kadm.ListPartitionReassignmentsResponse) {
		for _, a := range r.AddingReplicas {
			if b, ok := behind[tpb{r.Topic, r.Partition, a}]; ok {
				bytesLeft += b
				n++
			}
		}
	})
	if berr != nil && n == 0 {
		bytesLeft = -1
	}
	return left, bytesLeft, nil
}

// electPreferred moves leadership to the first replica of each target,
// as the plan intends; failures are warnings (leadership follows with
// auto.leader.rebalance.enable, or strata admin's peers' elections).
func electPreferred(ctx context.Context, adm *kadm.Client, target map[partKey][]int32) {
	var set kadm.TopicsSet
	for k := range target {
		set.Add(k.topic, k.partition)
	}
	if len(set) == 0 {
		return
	}
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: elect preferred leaders: %v\n", kadmErr(err))
		return
	}
	for _, ps := range rs {
		for _, r := range ps {
			if r.Err != nil && r.Err != kerr.ElectionNotNeeded {
				fmt.Fprintf(os.Stderr, "warning: elect the preferred leader of %s-%d: %s%s\n", r.Topic, r.Partition, errName(r.Err), paren(r.ErrMessage))
			}
		}
	}
}

// checkTargets compares the replicas in metadata with target, and
// describes the partitions that differ (none when all match).
func checkTargets(ctx context.Context, adm *kadm.Client, target map[partKey][]int32) []string {
	var topics []string
	for k := range target {
		if !slices.Contains(topics, k.topic) {
			topics = append(topics, k.topic)
		}
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return []string{fmt.Sprintf("metadata: %v", err)}
	}
	var bad []string
	for k, want := range target {
		got := md.Topics[k.topic].Partitions[k.partition].Replicas
		if !slices.Equal(got, want) {
			bad = append(bad, fmt.Sprintf("%s-%d has replicas %v, not %v", k.topic, k.partition, got, want))
		}
	}
	slices.Sort(bad)
	return bad
}

// firstFew joins the first n items and says how many more there are.
func firstFew(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}

// planBytes estimates the bytes p copies: for each adding replica, the
// local log of its partition's leader.
func planBytes(ctx context.Context, adm *kadm.Client, p plan) (int64, error) {
	var topics []string
	for _, m := range p.Moves {
		if len(m.Adding()) > 0 && !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	if len(topics) == 0 {
		return 0, nil
	}
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return 0, err
	}
	sz, err := logSizes(ctx, adm, td)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, m := range p.Moves {
		total += int64(len(m.Adding())) * sz.local[partKey{m.Topic, m.Partition}]
	}
	return total, nil
}

// awaitEmpty waits until broker id lists no partition in its data
// directory (the removed replicas are deleted), and says it may stop.
func awaitEmpty(ctx context.Context, adm *kadm.Client, id int32) int {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, id, nil)
		n := 0
		if err == nil {
			for _, d := range dirs {
				if !strings.Contains(d.Dir, "://") {
					d.Topics.Each(func(kadm.DescribedLogDirPartition) { n++ })
				}
			}
			if n == 0 {
				fmt.Printf("broker %d holds no replicas and has deleted its partitions; it may be stopped\n", id)
				return 0
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				// A broker that does not answer holds no replicas in
				// metadata all the same.
				fmt.Printf("broker %d holds no replicas; it may be stopped (its log dirs could not be described: %v)\n", id, err)
				return 0
			}
			return fail("broker decommission: broker %d holds no replicas but still lists %d partitions on its disk", id, n)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
