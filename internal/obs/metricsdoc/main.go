// Command metricsdoc writes docs/metrics.md from the catalog of metrics
// the broker declares (internal/obs): `go run ./internal/obs/metricsdoc`
// prints it, `-w FILE` writes it (`make metrics-doc`).
package main

import (
	"flag"
	"fmt"
	"os"

	_ "strata/broker" // declares the broker's, the tier's and (via its imports) others' metrics
	_ "strata/broker/remotelog"
	_ "strata/controller/zk"
	"strata/internal/obs"
)

func main() {
	out := flag.String("w", "", "write to this file instead of stdout")
	flag.Parse()
	doc := obs.Markdown(obs.All())
	if *out == "" {
		os.Stdout.Write(doc)
		return
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
}
