// Command mkimage builds Strata's container image as a tar that
// `docker load` and `podman load` read (see package strata/internal/image).
// `make image` runs it on a binary built with CGO_ENABLED=0:
//
//	go run ./internal/image/mkimage --binary bin/strata-linux-amd64 --arch amd64 --out bin/strata-image.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"strata/internal/image"
)

func main() {
	var (
		binary  = flag.String("binary", "", "the static strata binary (CGO_ENABLED=0, GOOS=linux)")
		arch    = flag.String("arch", runtime.GOARCH, "the binary's GOARCH")
		out     = flag.String("out", "bin/strata-image.tar", "the archive to write")
		tag     = flag.String("tag", "strata:latest", "the image's name and tag")
		props   = flag.String("properties", "deploy/docker/server.properties", "the image's server.properties")
		caCerts = flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the PEM bundle of CA certificates to ship")
		version = flag.String("version", "", "the org.opencontainers.image.version label")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		fail("unexpected argument %q", flag.Arg(0))
	}
	if *binary == "" {
		fail("--binary is required")
	}
	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fail("SOURCE_DATE_EPOCH %q: not a number of seconds", s)
		}
		created = time.Unix(sec, 0)
	}
	img, err := image.Build(image.Options{Binary: *binary, Properties: *props, CACerts: *caCerts,
		Arch: *arch, Version: *version, Created: created})
	if err != nil {
		fail("%v", err)
	}
	if err := image.WriteArchiveFile(*out, img, *tag); err != nil {
		fail("%v", err)
	}
	d, err := img.Digest()
	if err != nil {
		fail("%v", err)
	}
	fmt.Printf("%s %s %s (load with: docker load -i %s)\n", *out, *tag, d, *out)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mkimage: "+format+"\n", args...)
	os.Exit(1)
}
