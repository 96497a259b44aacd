package main

// strata admin cluster drain / resume, and strata admin restore: scaling
// a cluster to zero and bringing it back from the bucket
// (broker/drain.go, broker/remotelog/restore.go, tier/snapshot.go).

import (
	"context"
	"encoding/base64"
	"errors"

	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker"
	"strata/broker/config"
	"strata/controller"
	"strata/controller/zk"
	tierpkg "strata/tier"
)

const drainUsage = `usage: strata admin cluster drain [--timeout D]
       strata admin cluster resume

drain refuses writes on every broker and has each one roll and upload
the active segment of every tiered partition it leads. Transactions
still end while it drains: it waits until no transaction is open (each
one committed or aborted by its producer, or aborted by its coordinator
at its transaction.timeout.ms) and their markers are uploaded too. Once
every tiered partition's last tiered offset is its log end, it waits for
every broker to have written the metadata snapshot, the consumer groups'
committed offsets and the transaction state (__consumer_offsets and
__transaction_state are not tiered) to the bucket, and returns: nothing
exists only on a broker's disk and the brokers may all stop.
Records of topics without remote.storage.enable stay on the brokers'
disks: drain names them. resume accepts writes again (so does any broker
started after the drain).
`

// clusterDrain runs strata admin cluster drain.
func clusterDrain(e *adminEnv, args []string) int {
	fs := e.newFlagSet("cluster drain", drainUsage)
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the uploads")
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	if code, ok := e.noJSON("cluster drain"); !ok {
		return code
	}
	cl, err := e.client()
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	if err := alterDefaultBrokerConfig(ctx, adm, kadm.AlterConfig{Name: broker.DrainConfig, Value: &now}); err != nil {
		return fail("cluster drain: %v", err)
	}
	tiered, untiered, err := tieredTopics(ctx, adm)
	if err != nil {
		return fail("cluster drain: %v", err)
	}
	for _, t := range untiered {
		fmt.Fprintf(os.Stderr, "warning: topic %s is not tiered (remote.storage.enable=false): its records stay only on the brokers' disks\n", t)
	}
	fmt.Fprintf(os.Stderr, "draining: writes refused; uploading the active segments of %d tiered topics\n", len(tiered))
	began := time.Now()
	prog := newProgress(os.Stderr)
	waited := map[string]bool{} // transactional ids seen open
	var txnWait time.Duration
	for {
		// The transactions first: one that ends after this look writes
		// its markers, which the uploads then wait for.
		open, terr := openTransactions(ctx, adm)
		left, total, held, err := drainLeft(ctx, cl, tiered)
		if err == nil {
			err = terr
		}
		for _, t := range open {
			waited[t.TxnID] = true
		}
		if len(open) > 0 {
			txnWait = time.Since(began)
		}
		switch {
		case err != nil:
			prog.update(fmt.Sprintf("  %v (retrying)", err), "error")
		case left == 0 && len(open) == 0:
			prog.done()
			fmt.Println(drainedTransactions(waited, txnWait))
			fmt.Printf("drained: all %d partitions of tiered topics are in the bucket (%v)\n", total, time.Since(began).Round(time.Millisecond))
			return drainSnapshots(ctx, adm, *timeout)
		default:
			k := fmt.Sprintf("  %d of %d partitions still uploading", left, total)
			if held > 0 {
				k += fmt.Sprintf(" (%d held by open transactions)", held)
			}
			if len(open) > 0 {
				k += fmt.Sprintf("; waiting for %s to end (their producer's commit or abort, or their coordinator's abort at transaction.timeout.ms): %s",
					countTxns(len(open)), describeOpen(open))
			}
			prog.update(fmt.Sprintf("%s (%v)", k, time.Since(began).Round(time.Second)), k)
		}
		select {
		case <-ctx.Done():
			prog.done()
			if len(open) > 0 {
				return fail("cluster drain: not drained within %v: %d partitions still uploading, %d transactions open: %s", *timeout, left, len(open), describeOpen(open))
			}
			return fail("cluster drain: not drained within %v: %d partitions still uploading", *timeout, left)
		case <-time.After(time.Second):
		}
	}
}

// openStates are the states of a transaction that has not ended.
var openStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}

// openTransactions lists the transactions that have not ended, sorted.
func openTransactions(ctx context.Context, adm *kadm.Client) ([]kadm.ListedTransaction, error) {
	ls, err := adm.ListTransactions(ctx, nil, openStates)
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	return ls.Sorted(), nil
}

// describeOpen names open transactions (the first ten).
func describeOpen(open []kadm.ListedTransaction) string {
	var parts []string
	for i, t := range open {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(open)-10))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s, producer id %d)", t.TxnID, t.State, t.ProducerID))
	}
	return strings.Join(parts, ", ")
}

// drainedTransactions is the drain's line on transactions.
func drainedTransactions(waited map[string]bool, d time.Duration) string {
	if len(waited) == 0 {
		return "transactions: none was open"
	}
	ids := slices.Sorted(maps.Keys(waited))
	if len(ids) > 10 {
		ids = append(ids[:10], fmt.Sprintf("and %d more", len(waited)-10))
	}
	return fmt.Sprintf("transactions: waited %v for %s to end (%s); none is open, their markers are in the bucket",
		d.Round(time.Millisecond), countTxns(len(waited)), strings.Join(ids, ", "))
}

// countTxns is "1 open transaction", "2 open transactions".
func countTxns(n int) string {
	if n == 1 {
		return "1 open transaction"
	}
	return fmt.Sprintf("%d open transactions", n)
}

// drainSnapshots waits until every broker with tiered storage says its
// metadata snapshots (the cluster's on the controller, the committed
// offsets of the consumer groups it coordinates) are in the bucket as of
// now: read-only entries of its DescribeConfigs (the broker's
// metadata_snapshot.go).
func drainSnapshots(ctx context.Context, adm *kadm.Client, timeout time.Duration) int {
	const writtenKey, ownerKey = "strata.snapshot.written.ms", "strata.snapshot.cluster.id"
	since := time.Now().UnixMilli()
	var behind []string
	for {
		md, err := adm.Metadata(ctx)
		if err == nil {
			var rcs kadm.ResourceConfigs
			rcs, err = adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
			behind = behind[:0]
			tiered := 0
			for _, rc := range rcs {
				if err == nil && rc.Err != nil {
					err = fmt.Errorf("describe broker %s: %s", rc.Name, errName(rc.Err))
				}
				var written int64 = -1
				owner, has := "", false
				for _, c := range rc.Configs {
					switch {
					case c.Key == writtenKey && c.Value != nil:
						written, _ = strconv.ParseInt(*c.Value, 10, 64)
						has = true
					case c.Key == ownerKey && c.Value != nil:
						owner = *c.Value
					}
				}
				if !has {
					continue // no tiered storage
				}
				tiered++
				if owner != "" && owner != md.Cluster {
					return fail("cluster drain: the bucket's metadata snapshot belongs to cluster %s, not to this cluster %s: the brokers write neither metadata nor group offsets over it (strata admin restore adopts it, restore --discard throws it away)", owner, md.Cluster)
				}
				if written < since {
					behind = append(behind, rc.Name)
				}
			}
			if err == nil && len(behind) == 0 {
				if tiered == 0 {
					fmt.Println("no broker has tiered storage: no metadata snapshot or group offsets in a bucket; the brokers may stop")
					return 0
				}
				groups := "the committed offsets of the consumer groups"
				if lg, lerr := adm.ListGroups(ctx); lerr == nil {
					groups = fmt.Sprintf("the committed offsets of %d consumer groups", len(lg))
				}
				if lt, lerr := adm.ListTransactions(ctx, nil, nil); lerr == nil {
					fmt.Printf("transaction state: the state of %d transactional ids is in the bucket's snapshot (__transaction_state is not tiered, it comes back from the snapshot)\n", len(lt))
				}
				fmt.Printf("group offsets: %s and the cluster's metadata are in the bucket's snapshot (as of %s; __consumer_offsets is not tiered, its offsets come back from the snapshot); the brokers may stop\n",
					groups, time.UnixMilli(since).UTC().Format(time.RFC3339))
				return 0
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "  %v (retrying)\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "  waiting for brokers %s to write the group offsets, transaction state and metadata snapshot to the bucket\n", strings.Join(behind, ","))
		}
		select {
		case <-ctx.Done():
			return fail("cluster drain: the group offsets and metadata snapshot of brokers %s not in the bucket within %v (see their logs)", strings.Join(behind, ","), timeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// clusterResume runs strata admin cluster resume.
func clusterResume(e *adminEnv, args []string) int {
	fs := e.newFlagSet("cluster resume", drainUsage)
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	if code, ok := e.noJSON("cluster resume"); !ok {
		return code
	}
	cl, err := e.client()
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := alterDefaultBrokerConfig(ctx, kadm.NewClient(cl), kadm.AlterConfig{Name: broker.DrainConfig, Op: kadm.DeleteConfig}); err != nil {
		return fail("cluster resume: %v", err)
	}
	fmt.Println("resumed: writes accepted")
	return 0
}

// alterDefaultBrokerConfig changes one cluster-wide dynamic broker config.
func alterDefaultBrokerConfig(ctx context.Context, adm *kadm.Client, c kadm.AlterConfig) error {
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{c})
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s: %s", c.Name, errName(r.Err))
		}
	}
	return nil
}

// tieredTopics splits the user topics by remote.storage.enable.
func tieredTopics(ctx context.Context, adm *kadm.Client) (tiered, untiered []string, err error) {
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := slices.DeleteFunc(td.Names(), func(n string) bool { return strings.HasPrefix(n, "__") })
	if len(names) == 0 {
		return nil, nil, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, nil, err
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, nil, fmt.Errorf("describe configs of %s: %s", rc.Name, errName(rc.Err))
		}
		on := false
		for _, c := range rc.Configs {
			if c.Key == "remote.storage.enable" && c.Value != nil && *c.Value == "true" {
				on = true
			}
		}
		if on {
			tiered = append(tiered, rc.Name)
		} else {
			untiered = append(untiered, rc.Name)
		}
	}
	slices.Sort(tiered)
	slices.Sort(untiered)
	return tiered, untiered, nil
}

// drainLeft counts the partitions of topics whose records are not all in
// the bucket: the last tiered offset (ListOffsets -5) is short of the log
// end (-1), and the log is not empty (earliest -2 below the end); and
// among them those held by an open transaction: the last stable offset
// (-1 read_committed) below the log end (uploads stop there).
func drainLeft(ctx context.Context, cl *kgo.Client, topics []string) (left, total, held int, err error) {
	if len(topics) == 0 {
		return 0, 0, 0, nil
	}
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return 0, 0, 0, err
	}
	const lso = -100 // the key of the read_committed -1
	got := map[int64]map[string]map[int32]int64{}
	for _, ts := range []int64{-1, -2, -5, lso} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 9
		key := ts
		if ts == lso {
			ts, req.IsolationLevel = -1, 1
		}
		for _, t := range topics {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = t
			for p := range md.Topics[t].Partitions {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, ts
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		shards := cl.RequestSharded(ctx, req)
		got[key] = map[string]map[int32]int64{}
		for _, sh := range shards {
			if sh.Err != nil {
				return 0, 0, 0, sh.Err
			}
			for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return 0, 0, 0, fmt.Errorf("%s-%d: %s", t.Topic, p.Partition, errName(err))
					}
					if got[key][t.Topic] == nil {
						got[key][t.Topic] = map[int32]int64{}
					}
					got[key][t.Topic][p.Partition] = p.Offset
				}
			}
		}
	}
	for _, t := range topics {
		for p := range md.Topics[t].Partitions {
			total++
			end, start, tiered := got[-1][t][p], got[-2][t][p], got[-5][t][p]
			if end > start && tiered < end-1 {
				left++
				if got[lso][t][p] < end {
					held++
				}
			}
		}
	}
	return left, total, held, nil
}

const restoreUsage = `usage: strata admin restore --zookeeper CONNECT [--config FILE] --tier URL [--s3-endpoint URL] [--s3-region R] [--s3-ca-bundle FILE] [--s3-sse MODE [--s3-sse-kms-key-id ID]]
       strata admin restore --discard [--force] --tier URL [--s3-endpoint URL] [--s3-region R] [--s3-ca-bundle FILE] [--s3-sse MODE [--s3-sse-kms-key-id ID]]

Brings a cluster back from its bucket alone: the topics (with their ids,
partitions and configs), dynamic broker configs and producer id block
from the metadata snapshot the controller keeps in the bucket are written
into ZooKeeper (a fresh one: start the brokers, on empty disks, first,
and take your time: a cluster that finds another cluster's snapshot in
its bucket writes nothing over it and deletes none of its objects), the
cluster takes the snapshot's cluster id, the brokers take each
partition's log end from the bucket, and the consumer groups' committed
offsets are committed again through --bootstrap once every partition
serves. The transaction coordinators load the transactional ids' state
from the bucket themselves.

--discard instead throws the bucket's snapshot away and gives the bucket
to the cluster at --bootstrap: the snapshot's topics, their records in
the bucket (deleted by the brokers' reconciliation once
remote.log.reconciliation.grace.ms has passed), their configs, the
dynamic broker configs, the consumer groups' committed offsets and the
transaction state it kept are gone for good. It refuses a snapshot
written less than 3 minutes ago (a running cluster rewrites its snapshot
at least every minute: that cluster may be running on this bucket)
unless --force.

--config names a server.properties whose zookeeper.set.acl,
zookeeper.digest.user and zookeeper.digest.password restore uses (the
brokers' own, when their ZooKeeper is secured).
`

// runRestore runs strata admin restore.
func runRestore(e *adminEnv, args []string) int {
	fs := e.newFlagSet("restore", restoreUsage)
	zkConnect := fs.String("zookeeper", "", "ZooKeeper connect string, HOST:PORT[/chroot]")
	configFile := fs.String("config", "", "server.properties with the brokers' zookeeper.set.acl, zookeeper.digest.user and zookeeper.digest.password")
	tierURL := fs.String("tier", "", "the tier the cluster used, s3://bucket/prefix or file:///dir")
	s3 := addS3Flags(fs)
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for every partition to serve")
	discard := fs.Bool("discard", false, "throw the bucket's snapshot away and give the bucket to the cluster at --bootstrap")
	force := fs.Bool("force", false, "with --discard: discard a snapshot written less than 3 minutes ago")
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	switch {
	case *tierURL == "":
		return usageErr("restore: need --tier (see --help)")
	case *zkConnect == "" && !*discard:
		return usageErr("restore: need --zookeeper, or --discard (see --help)")
	case *zkConnect != "" && *discard:
		return usageErr("restore: --zookeeper and --discard exclude each other")
	case *force && !*discard:
		return usageErr("restore: --force goes with --discard only")
	}
	if code, ok := e.noJSON("restore"); !ok {
		return code
	}
	addrs, _ := e.bootstrapServers()
	bootstrap := strings.Join(addrs, ",")
	clientOpts, err := e.clientOpts()
	if err != nil {
		return fail("restore: %v", err)
	}
	tc := s3.config(*tierURL)
	if err := tc.Validate(); err != nil {
		return fail("restore: %v", err)
	}
	var auth zk.Auth
	if *configFile != "" {
		props, err := config.ReadPropertiesFile(*configFile)
		if err != nil {
			return fail("restore: --config: %v", err)
		}
		auth = zk.Auth{DigestUser: props["zookeeper.digest.user"], DigestPassword: props["zookeeper.digest.password"],
			SetACL: strings.EqualFold(strings.TrimSpace(props["zookeeper.set.acl"]), "true")}
		if err := auth.Validate(); err != nil {
			return fail("restore: --config: %v", err)
		}
	}
	store, err := tierpkg.Open(tc)
	if err != nil {
		return fail("restore: --tier: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *discard {
		minAge := discardMinAge
		if *force {
			minAge = 0
		}
		return discardSnapshot(ctx, bootstrap, clientOpts, store, *tierURL, minAge)
	}
	snap, err := tierpkg.ReadClusterSnapshot(ctx, store)
	if errors.Is(err, tierpkg.ErrNotFound) {
		return fail("restore: %s holds no cluster metadata snapshot", *tierURL)
	}
	if err != nil {
		return fail("restore: %v", err)
	}
	// Everything is read before anything is written.
	groups, err := tierpkg.ReadGroupOffsets(ctx, store, snap.ClusterID)
	if err != nil {
		return fail("restore: group offsets: %v", err)
	}
	txnStates, err := tierpkg.ReadTxnStates(ctx, store, snap.ClusterID)
	if err != nil {
		return fail("restore: transaction state: %v", err)
	}
	req := zk.RestoreRequest{NextProducerID: snap.NextProducerID, BrokerConfigs: map[string]map[string]string{}, ClusterID: snap.ClusterID, Auth: auth}
	for b, cfg := range snap.BrokerConfigs {
		c := map[string]string{}
		for k, v := range cfg {
			if k != broker.DrainConfig { // the restored cluster accepts writes
				c[k] = v
			}
		}
		req.BrokerConfigs[b] = c
	}
	for _, t := range snap.Topics {
		id, err := base64.RawURLEncoding.DecodeString(t.TopicID)
		if err != nil || len(id) != 16 {
			return fail("restore: topic %s: bad topic id %q in the snapshot", t.Name, t.TopicID)
		}
		rt := zk.RestoreTopic{Name: t.Name, Replicas: t.Replicas, Configs: t.Configs}
		copy(rt.ID[:], id)
		req.Topics = append(req.Topics, rt)
	}
	if len(snap.ACLs) > 0 {
		req.ACLs = map[controller.ACLResource][]controller.ACLEntry{}
		for _, a := range snap.ACLs {
			r := controller.ACLResource{Type: a.ResourceType, Pattern: a.PatternType, Name: a.Name}
			for _, e := range a.Entries {
				req.ACLs[r] = append(req.ACLs[r], controller.ACLEntry(e))
			}
		}
	}
	began := time.Now()
	res, err := zk.Restore(ctx, *zkConnect, req)
	if err != nil {
		return fail("restore: %v", err)
	}
	fmt.Printf("restored %d topics from the snapshot of %s (%d already there", len(res.Created), time.UnixMilli(snap.WrittenMs).UTC().Format(time.RFC3339), len(res.Existing))
	if len(res.Remapped) > 0 {
		fmt.Printf("; replicas moved to registered brokers: %s", strings.Join(res.Remapped, ", "))
	}
	fmt.Println(")")
	if res.ACLs+res.ExistingACLs > 0 {
		fmt.Printf("restored the ACLs of %d resource patterns (%d had ACLs already and kept them); SCRAM users are not in the bucket: create them again\n", res.ACLs, res.ExistingACLs)
	}
	if res.PreviousClusterID != "" {
		fmt.Printf("the cluster takes the snapshot's cluster id %s (was %s): the bucket's metadata (generation %d) is its own again\n", snap.ClusterID, res.PreviousClusterID, snap.Generation)
	}

	// Topics appear as the controller picks them up: ask for metadata
	// again soon rather than after franz-go's default 5 s.
	cl, err := kgo.NewClient(append(clientOpts, kgo.MetadataMinAge(100*time.Millisecond))...)
	if err != nil {
		return fail("restore: %v", err)
	}
	defer cl.Close()
	var names []string
	for _, t := range snap.Topics {
		names = append(names, t.Name)
	}
	for {
		err := allServe(ctx, cl, names)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fail("restore: not every partition serves within %v: %v", *timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Printf("every partition serves (%v after the restore began)\n", time.Since(began).Round(time.Millisecond))
	adm := kadm.NewClient(cl)
	n := 0
	for _, g := range groups {
		for group, topics := range g.Groups {
			var offs kadm.Offsets
			for t, parts := range topics {
				for p, o := range parts {
					offs.Add(kadm.Offset{Topic: t, Partition: p, At: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
				}
			}
			err := commitRestored(ctx, adm, group, offs)
			switch {
			case memberError(err):
				// The group has members: its coordinator merges the
				// offsets it lacks from the bucket (without member checks)
				// once the bucket is this cluster's.
				fmt.Fprintf(os.Stderr, "restore: warning: group %s has members (%s): its coordinator takes in the offsets it lacks from the bucket's snapshot\n", group, errName(err))
				continue
			case err != nil:
				return fail("restore: commit offsets of group %s: %s", group, errName(err))
			}
			n++
		}
	}
	fmt.Printf("committed the offsets of %d consumer groups\n", n)
	if ids := txnIDs(txnStates); ids > 0 {
		fmt.Printf("transaction state: the bucket holds the state of %d transactional ids; the transaction coordinators load it when their __transaction_state partitions start (the first transactional producer creates the topic)\n", ids)
	}
	return 0
}

// txnIDs counts the transactional ids of the bucket's transaction state.
func txnIDs(states []tierpkg.TxnStateSnapshot) int {
	n := 0
	for _, s := range states {
		n += len(s.Transactions)
	}
	return n
}

// commitRestored commits a group's restored offsets, retrying while its
// coordinator loads. A partition the group has a committed offset for
// already is left as it is: that one is newer than the snapshot's.
func commitRestored(ctx context.Context, adm *kadm.Client, group string, offs kadm.Offsets) error {
	for {
		have, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = have.Error()
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			have, err = nil, nil // no offsets
		}
		if err == nil {
			todo := kadm.Offsets{}
			offs.Each(func(o kadm.Offset) {
				if c, ok := have.Lookup(o.Topic, o.Partition); !ok || c.At < 0 {
					todo.Add(o)
				}
			})
			if len(todo) == 0 {
				return nil
			}
			var rs kadm.OffsetResponses
			if rs, err = adm.CommitOffsets(ctx, group, todo); err == nil {
				err = rs.Error()
			}
		}
		if err == nil || !kerr.IsRetriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// memberError tells whether a commit failed because the group has
// members (a commit without a member id is refused then).
func memberError(err error) bool {
	for _, e := range []error{kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress,
		kerr.FencedInstanceID, kerr.StaleMemberEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// discardMinAge is the age below which restore --discard refuses a
// snapshot without --force: a running cluster's active controller
// rewrites it at least every minute.
const discardMinAge = 3 * time.Minute

// discardSnapshot runs strata admin restore --discard, refusing a
// snapshot written less than minAge ago.
func discardSnapshot(ctx context.Context, bootstrap string, clientOpts []kgo.Opt, store tierpkg.ObjectStore, tierURL string, minAge time.Duration) int {
	cl, err := kgo.NewClient(clientOpts...)
	if err != nil {
		return fail("restore --discard: %v", err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return fail("restore --discard: the cluster at %s: %v", bootstrap, err)
	}
	if md.Cluster == "" {
		return fail("restore --discard: the cluster at %s has no cluster id", bootstrap)
	}
	old, err := tierpkg.DiscardClusterSnapshot(ctx, store, md.Cluster, time.Now(), minAge)
	var recent *tierpkg.RecentSnapshotError
	switch {
	case errors.As(err, &recent):
		return fail("restore --discard: refused: %v; stop it first, or pass --force if it is not", err)
	case errors.Is(err, tierpkg.ErrNotFound):
		return fail("restore --discard: %s holds no cluster metadata snapshot: nothing to discard", tierURL)
	case errors.Is(err, tierpkg.ErrOwnSnapshot):
		return fail("restore --discard: the metadata snapshot in %s is this cluster's (%s): nothing to discard", tierURL, md.Cluster)
	case err != nil:
		return fail("restore --discard: %v", err)
	}
	fmt.Printf("discarded the metadata snapshot of cluster %s (generation %d, written %s, %d topics): its topics and their records in the bucket (deleted by the brokers' reconciliation once remote.log.reconciliation.grace.ms has passed), their configs, the dynamic broker configs and the consumer groups' committed offsets it kept are gone; the bucket's metadata is now cluster %s's\n",
		old.ClusterID, old.Generation, time.UnixMilli(old.WrittenMs).UTC().Format(time.RFC3339), len(old.Topics), md.Cluster)
	return 0
}

// allServe tells whether every partition of topics answers ListOffsets
// at its leader.
func allServe(ctx context.Context, cl *kgo.Client, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	for _, t := range topics {
		if _, ok := ends[t]; !ok {
			return fmt.Errorf("topic %s not known yet", t)
		}
	}
	var bad error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && bad == nil {
			bad = fmt.Errorf("%s-%d: %s", o.Topic, o.Partition, errName(o.Err))
		}
	})
	return bad
}
