// Package image builds Strata's container image without a container
// engine: two layers made here (a minimal root file system, then the
// static strata binary) on an empty base, written as one tar file that is
// both an OCI image layout (oci-layout, index.json, blobs/sha256/…) and a
// docker-archive (manifest.json naming the same blobs), the format
// `docker save` writes since Docker 25. `docker load` and `podman load`
// read it.
//
// The image is the one deploy/docker/Dockerfile builds with Docker on
// gcr.io/distroless/static: the same user, entrypoint, ports, volume and
// files (a test keeps the two in step).
//
// The build is reproducible: every file and the image's creation time
// carry Options.Created (SOURCE_DATE_EPOCH in `make image`), so the same
// binary gives the same image digest.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout and settings. deploy/docker/Dockerfile says the same.
const (
	BinaryPath     = "/usr/local/bin/strata"
	PropertiesPath = "/etc/strata/server.properties"
	DataDir        = "/var/lib/strata"
	CACertsPath    = "/etc/ssl/certs/ca-certificates.crt"
	UID            = 65532 // distroless's nonroot
	User           = "65532:65532"
	UserName       = "strata"
	KafkaPort      = "9092/tcp"
	MetricsPort    = "9644/tcp"
	MetricsAddr    = "0.0.0.0:9644"
)

// Entrypoint is the image's entrypoint: `strata serve` with the image's
// properties file (listeners on 0.0.0.0:9092, log.dirs the volume) and
// metrics on port 9644. Arguments given to the container are appended;
// a repeated flag wins over the one before (`--metrics=` turns metrics
// off, `--config FILE` replaces the image's file).
var Entrypoint = []string{BinaryPath, "serve", "--config", PropertiesPath, "--metrics", MetricsAddr}

// Options are the inputs of Build.
type Options struct {
	Binary     string    // the strata binary: static, built with CGO_ENABLED=0 for Arch
	Properties string    // the image's server.properties (deploy/docker/server.properties)
	CACerts    string    // the PEM bundle of CA certificates to ship (the build machine's)
	Arch       string    // GOARCH of the binary: amd64, arm64, …
	Version    string    // for the org.opencontainers.image.version label; may be empty
	Created    time.Time // the time of every file and of the image; zero: the Unix epoch
}

// Build makes the image.
func Build(o Options) (v1.Image, error) {
	if o.Arch == "" {
		return nil, fmt.Errorf("image: no architecture given")
	}
	created := o.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: read binary: %w", err)
	}
	props, err := os.ReadFile(o.Properties)
	if err != nil {
		return nil, fmt.Errorf("image: read properties: %w", err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: read CA certificates: %w", err)
	}
	if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("image: %s holds no PEM certificate", o.CACerts)
	}

	root := []entry{
		dir("etc", 0, 0o755), dir("etc/ssl", 0, 0o755), dir("etc/ssl/certs", 0, 0o755), dir("etc/strata", 0, 0o755),
		file("etc/passwd", 0, 0o644, []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n%s:x:%d:%d:strata:%s:/sbin/nologin\n",
			UserName, UID, UID, DataDir))),
		file("etc/group", 0, 0o644, []byte(fmt.Sprintf("root:x:0:\nnobody:x:65534:\n%s:x:%d:\n", UserName, UID))),
		file("etc/nsswitch.conf", 0, 0o644, []byte("hosts: files dns\n")),
		file(strings.TrimPrefix(CACertsPath, "/"), 0, 0o644, certs),
		file(strings.TrimPrefix(PropertiesPath, "/"), 0, 0o644, props),
		dir("tmp", 0, 0o1777),
		dir("var", 0, 0o755), dir("var/lib", 0, 0o755),
		dir(strings.TrimPrefix(DataDir, "/"), UID, 0o750),
	}
	binLayer := []entry{
		dir("usr", 0, 0o755), dir("usr/local", 0, 0o755), dir("usr/local/bin", 0, 0o755),
		file(strings.TrimPrefix(BinaryPath, "/"), 0, 0o755, bin),
	}
	var layers []v1.Layer
	for _, es := range [][]entry{root, binLayer} {
		l, err := layer(es, created)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: created}
	cf.History = []v1.History{
		{Created: v1.Time{Time: created}, CreatedBy: "strata image: root file system (passwd, CA certificates, server.properties, " + DataDir + ")"},
		{Created: v1.Time{Time: created}, CreatedBy: "strata image: " + BinaryPath},
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "strata",
		"org.opencontainers.image.description": "Strata, a Kafka-protocol broker with tiered storage on S3",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if o.Version != "" {
		labels["org.opencontainers.image.version"] = o.Version
	}
	cf.Config = v1.Config{
		User:         User,
		Entrypoint:   append([]string(nil), Entrypoint...),
		Env:          []string{"PATH=/usr/local/bin"},
		WorkingDir:   DataDir,
		ExposedPorts: map[string]struct{}{KafkaPort: {}, MetricsPort: {}},
		Volumes:      map[string]struct{}{DataDir: {}},
		StopSignal:   "SIGTERM",
		Labels:       labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

type entry struct {
	name string
	uid  int
	mode int64
	dir  bool
	data []byte
}

func dir(name string, uid int, mode int64) entry {
	return entry{name: name, uid: uid, mode: mode, dir: true}
}
func file(name string, uid int, mode int64, data []byte) entry {
	return entry{name: name, uid: uid, mode: mode, data: data}
}

// layer makes a gzip-compressed OCI layer of entries, in name order.
func layer(entries []entry, mtime time.Time) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatUSTAR}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return l, nil
}

// blobPath is where a blob lives in the archive.
func blobPath(h v1.Hash) string { return path.Join("blobs", h.Algorithm, h.Hex) }
