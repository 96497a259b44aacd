// Command strata is the one binary: `strata serve`, `strata admin …` and
// `strata bench …`. It parses flags and hands over; no logic lives here.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

const usage = `usage: strata <command> [flags]

commands:
  serve    run a broker
  admin    administer a cluster: topics, groups, configs, tiered storage, brokers
  bench    run a benchmark against Strata and a peer
  version  print the version and commit this binary was built from
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "serve":
		code = runServe(os.Args[2:])
	case "admin":
		code = runAdmin(os.Args[2:])
	case "bench":
		code = runBench(os.Args[2:])
	case "version", "--version":
		code = runVersion(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "strata: unknown command %q\n%s", os.Args[1], usage)
		code = 2
	}
	os.Exit(code)
}

// version and commit are stamped at build time by the Makefile:
//
//	go build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)"
//
// Empty (a plain go build), they are taken from the build information
// the go command records (the module version, vcs.revision).
var version, commit string

// versionInfo is this binary's version, commit (with "-dirty" when built
// from a tree with local changes, as far as known) and Go version.
func versionInfo() (v, c, goVersion string) {
	v, c = version, commit
	bi, ok := debug.ReadBuildInfo()
	if ok {
		goVersion = bi.GoVersion
		if v == "" {
			v = bi.Main.Version
		}
		if c == "" {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if rev != "" && modified == "true" {
				rev += "-dirty"
			}
			c = rev
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	if c == "" {
		c = "unknown"
	}
	if goVersion == "" {
		goVersion = "unknown"
	}
	return v, c, goVersion
}

const versionUsage = `usage: strata version [--json]

Prints the version and commit this binary was built from (stamped by
make build; otherwise from the go command's build information, "devel"
and "unknown" when it has none) and the Go version.
`

func runVersion(args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprint(fs.Output(), versionUsage) }
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Print(versionUsage)
			return 0
		}
		fmt.Fprintf(os.Stderr, "strata version: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "strata version: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	v, c, g := versionInfo()
	if *asJSON {
		b, _ := json.Marshal(map[string]string{"version": v, "commit": c, "go": g})
		fmt.Println(string(b))
		return 0
	}
	fmt.Printf("strata %s (commit %s, %s)\n", v, c, g)
	return 0
}

// buildVersion describes this binary as slog attributes: the version and
// commit stamped at build time or recorded by the go command, and the Go
// version.
func buildVersion() []any {
	v, c, g := versionInfo()
	return []any{"version", v, "commit", c, "go", g}
}
