package main

// What every strata admin command shares: the global flags (--bootstrap,
// --json), where the bootstrap comes from, the client, argument parsing
// that rejects what a command does not use, JSON output, exit codes and
// the one-line progress display of long operations.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Exit codes of strata admin, which scripts may rely on (docs/admin.md).
const (
	exitOK       = 0 // done; nothing wrong found
	exitError    = 1 // the command failed (the cluster refused, a broker did not answer, …)
	exitUsage    = 2 // the command line is wrong: unknown command, flag or argument
	exitProblems = 3 // the command ran and found problems (cluster check: under-replicated or offline partitions)
)

// The bootstrap comes from --bootstrap, else from $STRATA_BOOTSTRAP, else
// from $BOOTSTRAP (what deploy/local/cluster.sh's cluster.env exports),
// else the default of `make run`. No broker config is named bootstrap.*,
// so strata serve leaves STRATA_BOOTSTRAP alone (broker/config/env.go).
const (
	strataBootstrapEnv = "STRATA_BOOTSTRAP"
	bootstrapEnv       = "BOOTSTRAP"
	defaultBootstrap   = "127.0.0.1:9092"
	metricsEnv         = "METRICS" // cluster.env: each broker's /metrics URL
)

// adminEnv is the state of one strata admin run.
type adminEnv struct {
	bootstrap string // --bootstrap; "" when not given
	// commandConfig is --command-config: a client properties file for a
	// secured listener; "" when not given.
	commandConfig string
	json          bool // --json: machine-readable output on stdout
	stdout        io.Writer
	stderr        io.Writer
	cl            *kgo.Client
}

func newAdminEnv() *adminEnv {
	return &adminEnv{stdout: os.Stdout, stderr: os.Stderr}
}

// globalFlags registers the flags every command accepts, wherever they
// stand on the command line.
func (e *adminEnv) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.bootstrap, "bootstrap", e.bootstrap, "brokers to contact, HOST:PORT[,HOST:PORT…] (default: $"+strataBootstrapEnv+", else $"+bootstrapEnv+", else "+defaultBootstrap+")")
	fs.BoolVar(&e.json, "json", e.json, "print JSON on stdout instead of tables")
	fs.StringVar(&e.commandConfig, "command-config", e.commandConfig, "a client properties file for a secured listener (security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config), as Kafka's tools take (default: $"+commandConfigEnv+")")
}

// clientOpts are the options of every Kafka client of the run: the
// bootstrap's brokers and the command config's security.
func (e *adminEnv) clientOpts() ([]kgo.Opt, error) {
	addrs, from := e.bootstrapServers()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no bootstrap address in %s", from)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...)}
	path := e.commandConfig
	if path == "" {
		path = strings.TrimSpace(os.Getenv(commandConfigEnv))
	}
	if path == "" {
		return opts, nil
	}
	sec, err := securityOpts(path)
	if err != nil {
		return nil, err
	}
	return append(opts, sec...), nil
}

// bootstrapServers is the bootstrap the run uses and where it came from.
func (e *adminEnv) bootstrapServers() (addrs []string, from string) {
	v, from := e.bootstrap, "--bootstrap"
	for _, env := range []string{strataBootstrapEnv, bootstrapEnv} {
		if v == "" {
			v, from = strings.TrimSpace(os.Getenv(env)), "$"+env
		}
	}
	if v == "" {
		v, from = defaultBootstrap, "the default"
	}
	for a := range strings.SplitSeq(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs, from
}

// client is the run's Kafka client, made on first use.
func (e *adminEnv) client() (*kgo.Client, error) {
	if e.cl != nil {
		return e.cl, nil
	}
	opts, err := e.clientOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		addrs, from := e.bootstrapServers()
		return nil, fmt.Errorf("bootstrap %s (from %s): %w", strings.Join(addrs, ","), from, err)
	}
	e.cl = cl
	return cl, nil
}

func (e *adminEnv) close() {
	if e.cl != nil {
		e.cl.Close()
	}
}

// printJSON writes v as indented JSON on stdout.
func (e *adminEnv) printJSON(v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail("json: %v", err)
	}
	return exitOK
}

// noJSON refuses --json for a command whose output is not yet JSON.
func (e *adminEnv) noJSON(cmd string) (int, bool) {
	if e.json {
		return usageErr("%s: --json is not supported by this command", cmd), false
	}
	return 0, true
}

// usageErr reports a wrong command line and returns exitUsage.
func usageErr(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "strata admin: "+format+"\n", args...)
	return exitUsage
}

// parseArgs parses flags and positional arguments in any order (Go's
// flag package stops at the first non-flag; this does not) and checks
// that there are at least minPos and at most maxPos (-1: any) positional
// ones. --help prints the usage on stdout and exits 0; a wrong flag or a
// positional argument too many is named, with exit 2. When ok is false the
// command exits with code.
func parseArgs(fs *flag.FlagSet, args []string, minPos, maxPos int) (pos []string, code int, ok bool) {
	fs.SetOutput(io.Discard)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stdout)
				fs.Usage()
				return nil, exitOK, false
			}
			return nil, usageErr("%s: %v (see --help)", fs.Name(), err), false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...) // after "--" everything is positional
			break
		}
		args = rest
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if maxPos >= 0 && len(pos) > maxPos {
		return nil, usageErr("%s: unexpected argument %q (see --help)", fs.Name(), pos[maxPos]), false
	}
	if len(pos) < minPos {
		fs.SetOutput(os.Stderr)
		fs.Usage()
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// newFlagSet is a command's flag set with the global flags and usage.
func (e *adminEnv) newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	e.globalFlags(fs)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage) }
	return fs
}

// progressLine shows the state of a long operation on one line of
// stderr: on a terminal it rewrites the line in place; otherwise (a log,
// a pipe) it writes a line when the state's text changes and at most
// every every.
type progressLine struct {
	w     io.Writer
	tty   bool
	every time.Duration
	last  time.Time
	text  string
	shown bool
}

func newProgress(w io.Writer) *progressLine {
	p := &progressLine{w: w, every: 10 * time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// update shows text; key is the part of it whose change is worth a new
// line when not on a terminal (text without the rate or time left).
func (p *progressLine) update(text, key string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", text)
		p.shown = true
		return
	}
	if key != p.text || time.Since(p.last) >= p.every {
		fmt.Fprintln(p.w, text)
		p.text, p.last = key, time.Now()
	}
}

// done ends the line on a terminal.
func (p *progressLine) done() {
	if p.tty && p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

// moveProgress is the progress of partition moves: how many partitions
// and bytes are left of how many, the copy rate over the run and the time
// left at that rate.
type moveProgress struct {
	began      time.Time
	partitions int   // in the plan
	firstBytes int64 // bytes left at the first reading, -1 unknown
}

// line is the progress text and its key (partitions left).
func (m *moveProgress) line(left int, bytesLeft int64, now time.Time) (string, string) {
	elapsed := now.Sub(m.began)
	key := fmt.Sprintf("%d of %d partitions left", left, m.partitions)
	var b strings.Builder
	b.WriteString(key)
	if bytesLeft >= 0 {
		fmt.Fprintf(&b, ", %s left", humanBytes(bytesLeft))
		if m.firstBytes < 0 {
			m.firstBytes = bytesLeft
		}
		copied := m.firstBytes - bytesLeft
		if copied > 0 && elapsed > 0 {
			rate := float64(copied) / elapsed.Seconds()
			fmt.Fprintf(&b, ", %s/s", humanBytes(int64(rate)))
			eta := time.Duration(float64(bytesLeft) / rate * float64(time.Second))
			fmt.Fprintf(&b, ", about %v left", eta.Round(time.Second))
		}
	}
	fmt.Fprintf(&b, " (%v)", elapsed.Round(time.Second))
	return b.String(), key
}
