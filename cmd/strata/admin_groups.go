package main

// strata admin groups: list, describe (with lag per partition), reset
// offsets and delete consumer groups, as kafka-consumer-groups does.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const groupsUsage = `usage: strata admin groups [list]
       strata admin groups describe GROUP...
       strata admin groups reset GROUP TARGET SCOPE [--execute] [--export]
       strata admin groups delete GROUP...

list prints every group with its type, protocol type, state and
coordinator.

describe prints, for each group, its state and members, and a row per
partition it has committed offsets for or is assigned: the committed
offset (CURRENT), the partition's end offset (END), LAG (END - CURRENT)
and the member consuming it, as kafka-consumer-groups --describe does.

reset computes new committed offsets for GROUP and prints them; only
with --execute does it commit them (a dry run otherwise). It refuses a
group with active members, as Kafka does: stop its consumers first.
TARGET is one of
  --to-earliest           each partition's start offset
  --to-latest             each partition's end offset
  --to-datetime T         the first offset at or after T (RFC 3339, e.g.
                          2026-01-02T15:04:05Z, or 2026-01-02T15:04:05.000
                          in local time, as Kafka writes it); the end
                          offset where no record is that recent
  --to-offset N           offset N
  --shift-by N            the committed offset plus N (N may be negative);
                          partitions without a committed offset are skipped
  --from-file FILE        the offsets of a CSV file of topic,partition,offset
                          lines (what --export writes)
and SCOPE is --topic TOPIC[:P,P...] (repeatable) or --all-topics (the
topics the group has committed offsets for); --from-file needs none.
Offsets outside a partition's start and end are moved to the nearer
one. --export prints the new offsets as CSV for --from-file instead of
the table.

delete deletes groups; a group with members is refused (NON_EMPTY_GROUP).
`

func runGroups(e *adminEnv, args []string) int {
	return subcommand(e, "groups", groupsUsage, args, map[string]func(*adminEnv, []string) int{
		"list":     groupsList,
		"describe": groupsDescribe,
		"reset":    groupsReset,
		"delete":   groupsDelete,
	}, groupsList)
}

// groupRow is a group in the output of groups list.
type groupRow struct {
	Group        string `json:"group"`
	Type         string `json:"type,omitempty"`
	ProtocolType string `json:"protocol_type"`
	State        string `json:"state"`
	Coordinator  int32  `json:"coordinator"`
}

func groupsList(e *adminEnv, args []string) int {
	fs := e.newFlagSet("groups list", groupsUsage)
	if _, code, ok := parseArgs(fs, args, 0, 0); !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return fail("groups list: %v", kadmErr(err))
	}
	rows := []groupRow{}
	for _, g := range gs.Sorted() {
		rows = append(rows, groupRow{Group: g.Group, Type: g.GroupType, ProtocolType: g.ProtocolType, State: g.State, Coordinator: g.Coordinator})
	}
	if e.json {
		return e.printJSON(rows)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTYPE\tPROTOCOL\tSTATE\tCOORDINATOR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.Group, dash(r.Type), dash(r.ProtocolType), dash(r.State), r.Coordinator)
	}
	tw.Flush()
	return exitOK
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupDescription is a group in the output of groups describe.
type groupDescription struct {
	Group        string           `json:"group"`
	State        string           `json:"state"`
	ProtocolType string           `json:"protocol_type"`
	Protocol     string           `json:"protocol"`
	Coordinator  int32            `json:"coordinator"`
	Members      []groupMember    `json:"members"`
	Partitions   []groupPartition `json:"partitions"`
	TotalLag     int64            `json:"total_lag"`
	Error        string           `json:"error,omitempty"`
}

type groupMember struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	Host       string  `json:"host"`
}

type groupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   *int64 `json:"current_offset"`
	End       *int64 `json:"log_end_offset"`
	Lag       *int64 `json:"lag"`
	MemberID  string `json:"member_id,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Host      string `json:"host,omitempty"`
	Error     string `json:"error,omitempty"`
}

// describeGroupLag turns kadm's lag of a group into its description.
func describeGroupLag(l kadm.DescribedGroupLag) groupDescription {
	d := groupDescription{Group: l.Group, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
		Coordinator: l.Coordinator.NodeID, Members: []groupMember{}, Partitions: []groupPartition{}}
	if err := l.Error(); err != nil {
		d.Error = errName(kadmErr(err))
	}
	for _, m := range l.Members {
		d.Members = append(d.Members, groupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost})
	}
	for _, ml := range l.Lag.Sorted() {
		p := groupPartition{Topic: ml.Topic, Partition: ml.Partition}
		if ml.Commit.At >= 0 {
			p.Current = &ml.Commit.At
		}
		if ml.End.Err == nil {
			end := ml.End.Offset
			p.End = &end
		}
		if ml.Lag >= 0 && p.Current != nil && ml.Err == nil {
			lag := ml.Lag
			p.Lag = &lag
			d.TotalLag += lag
		}
		if ml.Member != nil {
			p.MemberID, p.ClientID, p.Host = ml.Member.MemberID, ml.Member.ClientID, ml.Member.ClientHost
		}
		if ml.Err != nil {
			p.Error = errName(kadmErr(ml.Err))
		}
		d.Partitions = append(d.Partitions, p)
	}
	return d
}

func groupsDescribe(e *adminEnv, args []string) int {
	fs := e.newFlagSet("groups describe", groupsUsage)
	groups, code, ok := parseArgs(fs, args, 1, -1)
	if !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return fail("groups describe: %v", kadmErr(err))
	}
	var out []groupDescription
	code = exitOK
	for _, g := range groups {
		l, ok := lags[g]
		if !ok {
			out = append(out, groupDescription{Group: g, Error: "not described", Members: []groupMember{}, Partitions: []groupPartition{}})
			code = exitError
			continue
		}
		d := describeGroupLag(l)
		if d.Error != "" {
			code = exitError
		}
		out = append(out, d)
	}
	if e.json {
		e.printJSON(out)
		return code
	}
	for i, d := range out {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		writeGroupDescription(e.stdout, d)
	}
	return code
}

// writeGroupDescription writes a group's state line and its partitions.
func writeGroupDescription(w io.Writer, d groupDescription) {
	if d.Error != "" {
		fmt.Fprintf(w, "group %s: %s\n", d.Group, d.Error)
		return
	}
	fmt.Fprintf(w, "group %s: state %s, %d members, protocol %s, coordinator %d, total lag %d\n",
		d.Group, dash(d.State), len(d.Members), dash(d.Protocol), d.Coordinator, d.TotalLag)
	if len(d.Partitions) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tEND\tLAG\tMEMBER\tHOST\tCLIENT\tERROR")
	for _, p := range d.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, num(p.Current), num(p.End), num(p.Lag),
			dash(p.MemberID), dash(p.Host), dash(p.ClientID), p.Error)
	}
	tw.Flush()
}

func groupsDelete(e *adminEnv, args []string) int {
	fs := e.newFlagSet("groups delete", groupsUsage)
	groups, code, ok := parseArgs(fs, args, 1, -1)
	if !ok {
		return code
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	rs, err := adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return fail("groups delete: %v", kadmErr(err))
	}
	code = exitOK
	deleted := []string{}
	for _, g := range groups {
		r, ok := rs[g]
		switch {
		case !ok:
			fmt.Fprintf(os.Stderr, "strata: groups delete %s: no answer\n", g)
			code = exitError
		case r.Err != nil:
			fmt.Fprintf(os.Stderr, "strata: groups delete %s: %s\n", g, errName(kadmErr(r.Err)))
			code = exitError
		default:
			deleted = append(deleted, g)
			if !e.json {
				fmt.Fprintf(e.stdout, "deleted group %s\n", g)
			}
		}
	}
	if e.json {
		e.printJSON(map[string]any{"deleted": deleted})
	}
	return code
}

// topicScopes is --topic, repeatable: TOPIC or TOPIC:P,P,...
type topicScopes []string

func (s *topicScopes) String() string     { return strings.Join(*s, " ") }
func (s *topicScopes) Set(v string) error { *s = append(*s, v); return nil }

// resetRow is a partition in the output of groups reset.
type resetRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   *int64 `json:"current_offset"`
	New       int64  `json:"new_offset"`
	Error     string `json:"error,omitempty"`
}

func groupsReset(e *adminEnv, args []string) int {
	fs := e.newFlagSet("groups reset", groupsUsage)
	earliest := fs.Bool("to-earliest", false, "reset to each partition's start offset")
	latest := fs.Bool("to-latest", false, "reset to each partition's end offset")
	datetime := fs.String("to-datetime", "", "reset to the first offset at or after this time")
	toOffset := fs.String("to-offset", "", "reset to this offset")
	shift := fs.String("shift-by", "", "move the committed offsets by this many (may be negative)")
	file := fs.String("from-file", "", "reset to the offsets of this CSV file (topic,partition,offset)")
	var scopes topicScopes
	fs.Var(&scopes, "topic", "TOPIC or TOPIC:P,P,... to reset (repeatable)")
	allTopics := fs.Bool("all-topics", false, "reset every topic the group has committed offsets for")
	execute := fs.Bool("execute", false, "commit the new offsets (default: print them only)")
	fs.Bool("dry-run", false, "print the new offsets only (the default)")
	export := fs.Bool("export", false, "print the new offsets as CSV (for --from-file)")
	pos, code, ok := parseArgs(fs, args, 1, 1)
	if !ok {
		return code
	}
	group := pos[0]
	targets := 0
	for _, set := range []bool{*earliest, *latest, *datetime != "", *toOffset != "", *shift != "", *file != ""} {
		if set {
			targets++
		}
	}
	if targets != 1 {
		return usageErr("groups reset: want exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by, --from-file (got %d)", targets)
	}
	if *file == "" && (len(scopes) == 0) == !*allTopics {
		return usageErr("groups reset: want --topic TOPIC[:P,...] (repeatable) or --all-topics")
	}
	if *file != "" && *allTopics {
		return usageErr("groups reset: --from-file and --all-topics exclude each other")
	}
	var atMilli, n int64
	var err error
	switch {
	case *datetime != "":
		t, err := parseDatetime(*datetime)
		if err != nil {
			return usageErr("groups reset: --to-datetime %q: want RFC 3339 (2026-01-02T15:04:05Z) or 2026-01-02T15:04:05.000", *datetime)
		}
		atMilli = t.UnixMilli()
	case *toOffset != "":
		if n, err = strconv.ParseInt(*toOffset, 10, 64); err != nil || n < 0 {
			return usageErr("groups reset: --to-offset %q: want an offset, 0 or more", *toOffset)
		}
	case *shift != "":
		if n, err = strconv.ParseInt(*shift, 10, 64); err != nil {
			return usageErr("groups reset: --shift-by %q: want a whole number", *shift)
		}
	}
	var fromFile map[partKey]int64
	if *file != "" {
		if fromFile, err = readOffsetsFile(*file); err != nil {
			return usageErr("groups reset: --from-file %s: %v", *file, err)
		}
	}
	if *export && e.json {
		return usageErr("groups reset: --export and --json exclude each other")
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()

	// Kafka resets only an inactive group.
	dgs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fail("groups reset %s: describe: %v", group, kadmErr(err))
	}
	if d, ok := dgs[group]; ok && d.Err == nil && len(d.Members) > 0 {
		return fail("groups reset %s: the group has %d active members (state %s); offsets can only be reset while it has none: stop its consumers first", group, len(d.Members), d.State)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fail("groups reset %s: fetch committed offsets: %v", group, kadmErr(err))
	}

	// The partitions to reset.
	parts := map[partKey]bool{}
	var topics []string
	addTopic := func(t string) {
		if !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	whole := map[string]bool{}
	for _, sc := range scopes {
		t, ps, hasP := strings.Cut(sc, ":")
		if t == "" {
			return usageErr("groups reset: --topic %q: want TOPIC or TOPIC:P,P,...", sc)
		}
		addTopic(t)
		if !hasP {
			whole[t] = true
			continue
		}
		for p := range strings.SplitSeq(ps, ",") {
			pn, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || pn < 0 {
				return usageErr("groups reset: --topic %q: partition %q is not a number", sc, p)
			}
			parts[partKey{t, int32(pn)}] = true
		}
	}
	if *allTopics {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil {
				addTopic(o.Topic)
				whole[o.Topic] = true
			}
		})
	}
	for k := range fromFile {
		if len(scopes) == 0 || whole[k.topic] || parts[k] {
			addTopic(k.topic)
			parts[k] = true
		}
	}
	if len(topics) == 0 {
		return fail("groups reset %s: no partitions to reset (the group has no committed offsets)", group)
	}
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fail("groups reset %s: %v", group, err)
	}
	for _, t := range td.Sorted() {
		if t.Err != nil {
			return fail("groups reset %s: topic %s: %s", group, t.Topic, errName(t.Err))
		}
		if whole[t.Topic] && fromFile == nil {
			for p := range t.Partitions {
				parts[partKey{t.Topic, p}] = true
			}
		}
	}
	for k := range parts {
		if _, ok := td[k.topic].Partitions[k.partition]; !ok {
			return fail("groups reset %s: topic %s has no partition %d", group, k.topic, k.partition)
		}
	}

	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fail("groups reset %s: list start offsets: %v", group, kadmErr(err))
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fail("groups reset %s: list end offsets: %v", group, kadmErr(err))
	}
	var byTime kadm.ListedOffsets
	if *datetime != "" {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, atMilli, topics...); err != nil {
			return fail("groups reset %s: list offsets at %s: %v", group, *datetime, kadmErr(err))
		}
	}

	keys := make([]partKey, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b partKey) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	rows := []resetRow{}
	var offs kadm.Offsets
	code = exitOK
	for _, k := range keys {
		r := resetRow{Topic: k.topic, Partition: k.partition, New: -1}
		if o, ok := committed.Lookup(k.topic, k.partition); ok && o.Err == nil && o.At >= 0 {
			at := o.At
			r.Current = &at
		}
		s, sok := starts.Lookup(k.topic, k.partition)
		en, eok := ends.Lookup(k.topic, k.partition)
		if !sok || !eok || s.Err != nil || en.Err != nil {
			r.Error = "start or end offset not listed"
			if s.Err != nil {
				r.Error = "start offset: " + errName(s.Err)
			} else if en.Err != nil {
				r.Error = "end offset: " + errName(en.Err)
			}
			rows = append(rows, r)
			code = exitError
			continue
		}
		switch {
		case *earliest:
			r.New = s.Offset
		case *latest:
			r.New = en.Offset
		case *datetime != "":
			o, ok := byTime.Lookup(k.topic, k.partition)
			if !ok || o.Err != nil {
				r.Error = "offset by time not listed"
				if ok {
					r.Error = "offset by time: " + errName(o.Err)
				}
				rows = append(rows, r)
				code = exitError
				continue
			}
			r.New = o.Offset
			if r.New < 0 {
				r.New = en.Offset
			}
		case *toOffset != "":
			r.New = n
		case *shift != "":
			if r.Current == nil {
				r.Error = "no committed offset to shift: skipped"
				rows = append(rows, r)
				continue
			}
			r.New = *r.Current + n
		case fromFile != nil:
			r.New = fromFile[k]
		}
		r.New = min(max(r.New, s.Offset), en.Offset)
		rows = append(rows, r)
		offs.Add(kadm.Offset{Topic: k.topic, Partition: k.partition, At: r.New, LeaderEpoch: -1})
	}

	if *execute && len(offs) > 0 {
		rs, err := adm.CommitOffsets(ctx, group, offs)
		if err != nil {
			return fail("groups reset %s: commit: %v", group, kadmErr(err))
		}
		for i, r := range rows {
			if r.Error != "" {
				continue
			}
			if or, ok := rs.Lookup(r.Topic, r.Partition); ok && or.Err != nil {
				rows[i].Error = "commit: " + errName(kadmErr(or.Err))
				code = exitError
			}
		}
	}
	switch {
	case e.json:
		e.printJSON(map[string]any{"group": group, "executed": *execute, "partitions": rows})
	case *export:
		for _, r := range rows {
			if r.Error == "" {
				fmt.Fprintf(e.stdout, "%s,%d,%d\n", r.Topic, r.Partition, r.New)
			}
		}
	default:
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT\tNEW\tERROR")
		for _, r := range rows {
			nw := "-"
			if r.New >= 0 {
				nw = strconv.FormatInt(r.New, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", group, r.Topic, r.Partition, num(r.Current), nw, r.Error)
		}
		tw.Flush()
		if *execute {
			fmt.Fprintf(e.stdout, "committed the new offsets of %d partitions\n", len(offs))
		} else {
			fmt.Fprintln(e.stdout, "dry run: nothing committed; run again with --execute to commit these offsets")
		}
	}
	if code != exitOK && !e.json {
		fmt.Fprintf(os.Stderr, "strata: groups reset %s: some partitions failed, see ERROR\n", group)
	}
	return code
}

// parseDatetime reads RFC 3339, or Kafka's yyyy-MM-ddTHH:mm:ss[.SSS] in
// local time.
func parseDatetime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a time")
}

// readOffsetsFile reads CSV lines topic,partition,offset (blank lines and
// # comments skipped).
func readOffsetsFile(path string) (map[partKey]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[partKey]int64{}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fields := strings.Split(l, ",")
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: %q: want topic,partition,offset", line, l)
		}
		p, err1 := strconv.ParseInt(strings.TrimSpace(fields[1]), 10, 32)
		o, err2 := strconv.ParseInt(strings.TrimSpace(fields[2]), 10, 64)
		if t := strings.TrimSpace(fields[0]); t == "" || err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("line %d: %q: want topic,partition,offset", line, l)
		}
		out[partKey{strings.TrimSpace(fields[0]), int32(p)}] = o
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no offsets in it")
	}
	return out, nil
}
