package main

// strata admin cluster brokers / check, and the dispatch of cluster and
// broker commands (the others are in scale.go and admin_rebalance.go).

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

const clusterUsage = `usage: strata admin cluster brokers
       strata admin cluster check
       strata admin cluster rebalance [--execute] [--throttle BYTES_PER_SEC] [--topics A,B] [--timeout D]
       strata admin cluster drain [--timeout D]
       strata admin cluster resume

brokers lists the live brokers (id, address, rack) and names the
controller and the cluster id.

check reads every partition's leader and in-sync replicas from the
metadata and lists the partitions that are offline (no leader), under
their topic's min.insync.replicas (acks=all writes refused), or
under-replicated (fewer in-sync replicas than replicas), as
kafka-topics --describe --unavailable-partitions,
--under-min-isr-partitions and --under-replicated-partitions do. It
exits 0 when there is none, 3 when there is any.

See strata admin cluster rebalance --help and cluster drain --help.
`

func runCluster(e *adminEnv, args []string) int {
	return subcommand(e, "cluster", clusterUsage, args, map[string]func(*adminEnv, []string) int{
		"brokers":   clusterBrokers,
		"check":     clusterCheck,
		"rebalance": clusterRebalance,
		"drain":     clusterDrain,
		"resume":    clusterResume,
	}, nil)
}

const brokerUsage = `usage: strata admin broker decommission ID [--execute] [--throttle BYTES_PER_SEC] [--timeout D]

See strata admin broker decommission --help.
`

func runBroker(e *adminEnv, args []string) int {
	return subcommand(e, "broker", brokerUsage, args, map[string]func(*adminEnv, []string) int{
		"decommission": brokerDecommission,
	}, nil)
}

// brokerRow is a broker in the output of cluster brokers.
type brokerRow struct {
	ID         int32   `json:"id"`
	Host       string  `json:"host"`
	Port       int32   `json:"port"`
	Rack       *string `json:"rack"`
	Controller bool    `json:"controller"`
}

func clusterBrokers(e *adminEnv, args []string) int {
	fs := e.newFlagSet("cluster brokers", clusterUsage)
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fail("cluster brokers: %v", err)
	}
	rows := []brokerRow{}
	for _, b := range md.Brokers {
		rows = append(rows, brokerRow{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Controller: b.NodeID == md.Controller})
	}
	slices.SortFunc(rows, func(a, b brokerRow) int { return int(a.ID) - int(b.ID) })
	if e.json {
		return e.printJSON(map[string]any{"cluster_id": md.Cluster, "controller": md.Controller, "brokers": rows})
	}
	fmt.Fprintf(e.stdout, "cluster %s, controller %d, %d brokers\n", md.Cluster, md.Controller, len(rows))
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tRACK\tCONTROLLER")
	for _, r := range rows {
		rack, ctl := "-", ""
		if r.Rack != nil {
			rack = *r.Rack
		}
		if r.Controller {
			ctl = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.ID, fmt.Sprintf("%s:%d", r.Host, r.Port), rack, ctl)
	}
	tw.Flush()
	return exitOK
}

// checkRow is a partition with problems in the output of cluster check.
type checkRow struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Leader    int32    `json:"leader"`
	Replicas  []int32  `json:"replicas"`
	ISR       []int32  `json:"isr"`
	MinISR    int      `json:"min_insync_replicas"`
	Problems  []string `json:"problems"`
}

// checkReport is the output of cluster check.
type checkReport struct {
	Partitions      int        `json:"partitions"`
	Offline         int        `json:"offline"`
	UnderMinISR     int        `json:"under_min_isr"`
	UnderReplicated int        `json:"under_replicated"`
	Problems        []checkRow `json:"problem_partitions"`
}

// checkPartitions finds the offline, under-min-ISR and under-replicated
// partitions of td; minISR is each topic's min.insync.replicas (1 when
// unknown).
func checkPartitions(td kadm.TopicDetails, minISR map[string]int) checkReport {
	rep := checkReport{Problems: []checkRow{}}
	for _, t := range td.Sorted() {
		if t.Err != nil {
			continue
		}
		m := max(1, minISR[t.Topic])
		for _, p := range t.Partitions.Sorted() {
			rep.Partitions++
			r := checkRow{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR, MinISR: m}
			if p.Leader < 0 {
				r.Problems = append(r.Problems, "offline")
				rep.Offline++
			}
			if len(p.ISR) < m && len(p.Replicas) >= m {
				r.Problems = append(r.Problems, "under-min-isr")
				rep.UnderMinISR++
			}
			if len(p.ISR) < len(p.Replicas) {
				r.Problems = append(r.Problems, "under-replicated")
				rep.UnderReplicated++
			}
			if len(r.Problems) > 0 {
				rep.Problems = append(rep.Problems, r)
			}
		}
	}
	return rep
}

func clusterCheck(e *adminEnv, args []string) int {
	fs := e.newFlagSet("cluster check", clusterUsage)
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	md, err := adm.Metadata(ctx)
	if err != nil {
		return fail("cluster check: %v", err)
	}
	minISR := map[string]int{}
	if names := md.Topics.Names(); len(names) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return fail("cluster check: describe the topics' min.insync.replicas: %v", kadmErr(err))
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" {
					if n, err := strconv.Atoi(c.MaybeValue()); err == nil {
						minISR[rc.Name] = n
					}
				}
			}
		}
	}
	rep := checkPartitions(md.Topics, minISR)
	found := rep.Offline+rep.UnderMinISR+rep.UnderReplicated > 0
	if e.json {
		e.printJSON(rep)
	} else {
		if len(rep.Problems) > 0 {
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tREPLICAS\tISR\tMIN_ISR\tPROBLEMS")
			for _, r := range rep.Problems {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%v\t%d\t%s\n", r.Topic, r.Partition, r.Leader, r.Replicas, r.ISR, r.MinISR, strings.Join(r.Problems, ","))
			}
			tw.Flush()
		}
		fmt.Fprintf(e.stdout, "%d partitions: %d offline, %d under min ISR, %d under-replicated\n", rep.Partitions, rep.Offline, rep.UnderMinISR, rep.UnderReplicated)
	}
	if found {
		return exitProblems
	}
	return exitOK
}
