package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"strata/internal/testenv"
)

const testTag = "strata:test"

var built struct {
	once    sync.Once
	dir     string
	archive string
	opts    Options
	digest  v1.Hash
	err     error
}

// buildImage builds the static binary (as `make image` does) and the
// image archive, once per test binary.
func buildImage(t *testing.T) (archive string, opts Options, digest v1.Hash) {
	t.Helper()
	built.once.Do(func() {
		built.err = func() error {
			root, err := testenv.ModuleRoot()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "strata-image-test-")
			if err != nil {
				return err
			}
			built.dir = dir
			bin := filepath.Join(dir, "strata")
			cmd := exec.Command(goCommand(), "build", "-trimpath", "-o", bin, "./cmd/strata") // as make image builds it
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
			if out, err := cmd.CombinedOutput(); err != nil {
				return errors.New("go build ./cmd/strata with CGO_ENABLED=0: " + err.Error() + "\n" + string(out))
			}
			built.opts = Options{
				Binary:     bin,
				Properties: filepath.Join(root, "deploy/docker/server.properties"),
				CACerts:    "/etc/ssl/certs/ca-certificates.crt",
				Arch:       runtime.GOARCH,
				Version:    "test",
				Created:    time.Unix(1700000000, 0),
			}
			img, err := Build(built.opts)
			if err != nil {
				return err
			}
			if built.digest, err = img.Digest(); err != nil {
				return err
			}
			built.archive = filepath.Join(dir, "strata-image.tar")
			return WriteArchiveFile(built.archive, img, testTag)
		}()
	})
	if built.err != nil {
		t.Fatalf("build image: %v", built.err)
	}
	return built.archive, built.opts, built.digest
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func goCommand() string {
	if gr := runtime.GOROOT(); gr != "" {
		if _, err := os.Stat(filepath.Join(gr, "bin", "go")); err == nil {
			return filepath.Join(gr, "bin", "go")
		}
	}
	return "go"
}

// TestImageArchive reads the archive back both as a docker-archive (what
// `docker load` reads) and as an OCI image layout, and checks the image's
// config, its files, and that its binary is a static executable that runs.
func TestImageArchive(t *testing.T) {
	archive, opts, digest := buildImage(t)

	tag, err := name.NewTag(testTag)
	if err != nil {
		t.Fatal(err)
	}
	docker, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatalf("read as docker-archive: %v", err)
	}
	if err := validate.Image(docker); err != nil {
		t.Fatalf("docker-archive image does not validate: %v", err)
	}
	oci := readOCILayout(t, archive)
	if err := validate.Image(oci); err != nil {
		t.Fatalf("OCI layout image does not validate: %v", err)
	}
	if d, _ := oci.Digest(); d != digest {
		t.Errorf("OCI layout's manifest digest %s, want the built %s", d, digest)
	}
	dc, _ := docker.ConfigName()
	oc, _ := oci.ConfigName()
	if dc != oc {
		t.Errorf("docker-archive config %s, OCI config %s: two different images", dc, oc)
	}

	cf, err := oci.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if c.User == "" || c.User == "root" || strings.HasPrefix(c.User, "0") {
		t.Errorf("user %q: the image must not run as root", c.User)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want numeric 65532:65532 (so that runAsNonRoot can check it)", c.User)
	}
	if len(c.Entrypoint) < 2 || !slices.Equal(c.Entrypoint[:2], []string{"/usr/local/bin/strata", "serve"}) {
		t.Errorf("entrypoint %q, want strata serve …", c.Entrypoint)
	}
	wantPorts := map[string]struct{}{"9092/tcp": {}, "9644/tcp": {}}
	if !reflect.DeepEqual(c.ExposedPorts, wantPorts) {
		t.Errorf("exposed ports %v, want %v", c.ExposedPorts, wantPorts)
	}
	if !reflect.DeepEqual(c.Volumes, map[string]struct{}{"/var/lib/strata": {}}) {
		t.Errorf("volumes %v, want /var/lib/strata", c.Volumes)
	}
	if !cf.Created.Time.Equal(opts.Created) {
		t.Errorf("created %v, want %v", cf.Created.Time, opts.Created)
	}

	files := extract(t, oci)
	passwd := string(files["etc/passwd"].data)
	if !strings.Contains(passwd, ":65532:65532:") {
		t.Errorf("/etc/passwd has no user 65532:\n%s", passwd)
	}
	if h := files["var/lib/strata"].hdr; h == nil || h.Uid != 65532 || h.Typeflag != tar.TypeDir {
		t.Errorf("/var/lib/strata: %+v, want a directory owned by 65532", h)
	}
	if h := files["tmp"].hdr; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", h)
	}
	if !bytes.Contains(files["etc/ssl/certs/ca-certificates.crt"].data, []byte("BEGIN CERTIFICATE")) {
		t.Error("no CA certificates at /etc/ssl/certs/ca-certificates.crt")
	}
	if got := files["etc/strata/server.properties"].data; !bytes.Contains(got, []byte("log.dirs=/var/lib/strata")) {
		t.Errorf("/etc/strata/server.properties does not put the data in the volume:\n%s", got)
	}
	bin := files["usr/local/bin/strata"]
	if bin.hdr == nil || bin.hdr.Mode&0o111 == 0 {
		t.Fatalf("/usr/local/bin/strata missing or not executable: %+v", bin.hdr)
	}

	// The binary is a static executable: no program interpreter (the
	// dynamic loader) and no shared library needed.
	f, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("/usr/local/bin/strata is not ELF: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/usr/local/bin/strata has a PT_INTERP: dynamically linked, it would not start on a scratch image")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("/usr/local/bin/strata needs shared libraries %v", libs)
	}

	// It runs.
	exe := filepath.Join(t.TempDir(), "strata")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "serve") {
		t.Errorf("strata --help from the image: %v\n%s", err, out)
	}

	// The same inputs give the same image.
	again, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != digest {
		t.Errorf("a second build has digest %s, the first %s: the build is not reproducible", d, digest)
	}
}

// TestImageEntrypointServes runs the image's entrypoint, as a container
// engine would, with the image's own binary and server.properties: it
// must come up and answer its ready line, and stop cleanly on SIGTERM.
// Paths are those of the extracted files; the listener, the data
// directory and the metrics port are moved to loopback and a temporary
// directory with the environment and a flag, as a user of the image
// would.
func TestImageEntrypointServes(t *testing.T) {
	archive, _, _ := buildImage(t)
	img := readOCILayout(t, archive)
	files := extract(t, img)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	remap := map[string]string{}
	for _, p := range []string{"usr/local/bin/strata", "etc/strata/server.properties"} {
		local := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(local, files[p].data, 0o755); err != nil {
			t.Fatal(err)
		}
		remap["/"+p] = local
	}
	var args []string
	for _, a := range cf.Config.Entrypoint {
		if r, ok := remap[a]; ok {
			a = r
		}
		args = append(args, a)
	}
	args = append(args, "--metrics", "127.0.0.1:0") // a later flag wins
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(),
		"STRATA_LISTENERS=PLAINTEXT://127.0.0.1:0",
		"STRATA_LOG_DIRS="+filepath.Join(dir, "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatalf("the entrypoint exited before its ready line:\n%s", stderr.String())
		}
		if !strings.Contains(line, "listen=127.0.0.1:") || !strings.Contains(line, "metrics=127.0.0.1:") {
			t.Errorf("ready line %q: want the environment's listener and the flag's metrics address", line)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the entrypoint printed no ready line within 30s:\n%s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stop on SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Errorf("no stop within 30s of SIGTERM")
	}
}

// TestDockerfileMatchesImage: deploy/docker/Dockerfile builds the image
// that `make image` builds: the same user, entrypoint, ports, volume and
// file paths.
func TestDockerfileMatchesImage(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy/docker/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var final []string // the last stage's instructions
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			final = nil
		}
		final = append(final, line)
	}
	instr := func(kw string) []string {
		var out []string
		for _, l := range final {
			if rest, ok := strings.CutPrefix(l, kw+" "); ok {
				out = append(out, rest)
			}
		}
		return out
	}
	one := func(kw string) string {
		v := instr(kw)
		if len(v) != 1 {
			t.Fatalf("Dockerfile's last stage has %d %s instructions, want 1", len(v), kw)
		}
		return v[0]
	}
	if u := one("USER"); u != User {
		t.Errorf("Dockerfile USER %s, image %s", u, User)
	}
	var ep []string
	if err := json.Unmarshal([]byte(one("ENTRYPOINT")), &ep); err != nil {
		t.Fatalf("Dockerfile ENTRYPOINT is not the JSON form: %v", err)
	}
	if !slices.Equal(ep, Entrypoint) {
		t.Errorf("Dockerfile ENTRYPOINT %q, image %q", ep, Entrypoint)
	}
	var vol []string
	if err := json.Unmarshal([]byte(one("VOLUME")), &vol); err != nil || !slices.Equal(vol, []string{DataDir}) {
		t.Errorf("Dockerfile VOLUME %s, image [%q]", one("VOLUME"), DataDir)
	}
	ports := strings.Fields(one("EXPOSE"))
	slices.Sort(ports)
	if !slices.Equal(ports, []string{KafkaPort, MetricsPort}) {
		t.Errorf("Dockerfile EXPOSE %v, image %s %s", ports, KafkaPort, MetricsPort)
	}
	if w := one("WORKDIR"); w != DataDir {
		t.Errorf("Dockerfile WORKDIR %s, image %s", w, DataDir)
	}
	copies := strings.Join(instr("COPY"), "\n")
	for _, p := range []string{BinaryPath, PropertiesPath, DataDir, "deploy/docker/server.properties"} {
		if !strings.Contains(copies, p) {
			t.Errorf("Dockerfile's last stage copies nothing to or from %s", p)
		}
	}
	if !strings.Contains(copies, "--chown=65532:65532") {
		t.Errorf("Dockerfile does not give %s to the image's user", DataDir)
	}
	if !strings.Contains(string(data), "CGO_ENABLED=0") {
		t.Error("Dockerfile builds strata without CGO_ENABLED=0: not a static binary")
	}
}

// readOCILayout unpacks archive and opens it as an OCI image layout.
func readOCILayout(t *testing.T, archive string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("read as OCI image layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	if ref := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != "test" {
		t.Errorf("index.json ref.name %q, want %q", ref, "test")
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type fsEntry struct {
	hdr  *tar.Header
	data []byte
}

// extract returns the image's flattened file system, by path.
func extract(t *testing.T, img v1.Image) map[string]fsEntry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]fsEntry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("extract image: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")] = fsEntry{hdr: h, data: data}
	}
}
