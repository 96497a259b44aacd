// Command strata is the one binary: `strata serve`, `strata admin …` and
// `strata bench …`. It parses flags and hands over; no logic lives here.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

const usage = `usage: strata <command> [flags]

commands:
  serve   run a broker
  admin   administer topics and configs of a cluster
  bench   run a benchmark against Strata and a peer
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
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "strata: unknown command %q\n%s", os.Args[1], usage)
		code = 2
	}
	os.Exit(code)
}

// buildVersion describes this binary as slog attributes: the module
// version the go command stamped (from the commit, "+dirty" with local
// changes; "devel" when built with -buildvcs=false) and the Go version.
func buildVersion() []any {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return []any{"version", "unknown"}
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	return []any{"version", v, "go", bi.GoVersion}
}
