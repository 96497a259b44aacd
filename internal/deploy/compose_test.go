package deploy

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"strata/broker/config"
	"strata/internal/testenv"
)

// composeFile is the part of the compose specification the test reads.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Hostname    string            `yaml:"hostname"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// imageProperties is the container image's own server.properties, the
// layer under every broker's environment.
func imageProperties(t *testing.T) map[string]string {
	t.Helper()
	p, err := config.ParseProperties(readFile(t, "deploy/docker/server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The flags of `strata serve` that have no config key, which the compose
// file passes as arguments (with their values).
var argFlags = []string{"tier", "s3-endpoint", "s3-region", "metrics"}

// TestComposeFile checks deploy/compose/compose.yaml without running it
// (no container engine runs here): it parses, its services
// depend on services that exist, every broker's STRATA_ variables are
// broker configs (config.FromEnv, as `strata serve` reads them) and make a
// configuration the broker loads over the image's server.properties, the
// broker ids and advertised addresses are distinct and name the broker's
// own service and published port, ZooKeeper and the S3 endpoint name
// services of the file, the tier's bucket is the one the setup container
// makes, and no host port is published twice.
func TestComposeFile(t *testing.T) {
	data := readFile(t, "deploy/compose/compose.yaml")
	var cf composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&cf); err != nil {
		t.Fatalf("parse compose.yaml: %v", err)
	}
	for _, s := range []string{"zookeeper", "minio", "minio-setup", "broker-1", "broker-2", "broker-3"} {
		if _, ok := cf.Services[s]; !ok {
			t.Errorf("no service %s", s)
		}
	}
	hostPorts := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(cf.Services)) {
		s := cf.Services[name]
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		for dep := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			}
		}
		for _, p := range s.Ports {
			host, _, ok := strings.Cut(p, ":")
			if !ok {
				t.Errorf("%s: port %q publishes no host port", name, p)
				continue
			}
			if other, dup := hostPorts[host]; dup {
				t.Errorf("host port %s published by %s and %s", host, other, name)
			}
			hostPorts[host] = name
		}
		for _, v := range s.Volumes {
			vol, _, _ := strings.Cut(v, ":")
			if _, ok := cf.Volumes[vol]; !ok && !strings.HasPrefix(vol, ".") && !strings.HasPrefix(vol, "/") {
				t.Errorf("%s mounts volume %s, which the file does not declare", name, vol)
			}
		}
	}

	// The bucket the setup container makes.
	setup := strings.Join(cf.Services["minio-setup"].Command, "\n")
	m := regexp.MustCompile(`mc mb (?:--ignore-existing )?local/([a-z0-9.-]+)`).FindStringSubmatch(setup)
	if m == nil {
		t.Fatalf("minio-setup makes no bucket (mc mb local/BUCKET):\n%s", setup)
	}
	bucket := m[1]

	ids := map[string]string{}
	brokers := 0
	for _, name := range slices.Sorted(maps.Keys(cf.Services)) {
		s := cf.Services[name]
		if !strings.HasPrefix(name, "broker-") {
			continue
		}
		brokers++
		t.Run(name, func(t *testing.T) {
			checkBroker(t, cf, name, s, bucket, ids)
		})
	}
	if brokers != 3 {
		t.Errorf("%d brokers, want 3", brokers)
	}
}

func checkBroker(t *testing.T, cf composeFile, name string, s composeService, bucket string, ids map[string]string) {
	if s.Image != "strata:latest" {
		t.Errorf("image %q, want strata:latest (what make image tags)", s.Image)
	}
	if s.StopGracePeriod == "" {
		t.Error("no stop_grace_period: the default 10s cuts a controlled shutdown short")
	}
	var environ []string
	for k, v := range s.Environment {
		switch {
		case strings.HasPrefix(k, config.EnvPrefix):
		case strings.HasPrefix(k, "AWS_"):
		default:
			t.Errorf("environment %s: neither a STRATA_ setting nor an AWS_ variable", k)
		}
		environ = append(environ, k+"="+v)
	}
	env, err := config.FromEnv(environ, argFlags)
	if err != nil {
		t.Fatal(err)
	}
	for k := range s.Environment {
		if key, ok := config.EnvKey(k); ok {
			if _, taken := env[key]; !taken {
				t.Errorf("%s is not a broker config: strata serve would ignore it", k)
			}
		}
	}
	props := imageProperties(t)
	config.MergeEnv(props, env)
	cfg, err := config.Load(props)
	if err != nil {
		t.Fatalf("the broker would refuse its configuration: %v", err)
	}
	if cfg.ZooKeeperConnect == "" {
		t.Fatal("no zookeeper.connect: each broker would run its own embedded controller")
	}
	if other, dup := ids[strconv.Itoa(int(cfg.ID))]; dup {
		t.Errorf("broker.id %d also %s's", cfg.ID, other)
	}
	ids[strconv.Itoa(int(cfg.ID))] = name
	if want := fmt.Sprintf("broker-%d", cfg.ID); want != name {
		t.Errorf("broker.id %d in service %s", cfg.ID, name)
	}
	zkHost, _, _ := strings.Cut(strings.Split(cfg.ZooKeeperConnect, ",")[0], ":")
	if _, ok := cf.Services[zkHost]; !ok {
		t.Errorf("zookeeper.connect %s: %s is not a service", cfg.ZooKeeperConnect, zkHost)
	}
	if _, ok := s.DependsOn[zkHost]; !ok {
		t.Errorf("does not depend on %s", zkHost)
	}

	// Each advertised address: the INTERNAL one is the service's own
	// name, the EXTERNAL one a host port published to the listener's
	// port.
	listenPort := map[string]int32{}
	for _, l := range cfg.Listeners {
		listenPort[l.Name] = l.Port
	}
	for _, a := range cfg.AdvertisedListeners {
		switch a.Name {
		case cfg.InterBrokerListener:
			if a.Host != name || a.Port != listenPort[a.Name] {
				t.Errorf("inter-broker listener advertised as %s, want %s:%d", a, name, listenPort[a.Name])
			}
		default:
			want := fmt.Sprintf("%d:%d", a.Port, listenPort[a.Name])
			if !slices.Contains(s.Ports, want) {
				t.Errorf("listener %s advertised at port %d, but ports %v do not publish %s", a.Name, a.Port, s.Ports, want)
			}
		}
	}

	// The arguments: --flag value pairs of flags without a config key;
	// the tier in the setup container's bucket, on the MinIO service.
	args := map[string]string{}
	for i := 0; i < len(s.Command); i += 2 {
		f, ok := strings.CutPrefix(s.Command[i], "--")
		if !ok || !slices.Contains(argFlags, f) || i+1 >= len(s.Command) {
			t.Fatalf("command %q: want --flag value pairs of %v", s.Command, argFlags)
		}
		args[f] = s.Command[i+1]
	}
	tier, err := url.Parse(args["tier"])
	if err != nil || tier.Scheme != "s3" || tier.Host != bucket {
		t.Errorf("--tier %q: want s3://%s/…, the bucket minio-setup makes", args["tier"], bucket)
	}
	ep, err := url.Parse(args["s3-endpoint"])
	if err != nil {
		t.Fatalf("--s3-endpoint: %v", err)
	}
	if _, ok := cf.Services[ep.Hostname()]; !ok {
		t.Errorf("--s3-endpoint %s: %s is not a service", args["s3-endpoint"], ep.Hostname())
	}
	if _, ok := s.DependsOn["minio-setup"]; !ok {
		t.Error("does not wait for minio-setup (the bucket)")
	}
	if s.Environment["AWS_ACCESS_KEY_ID"] == "" || s.Environment["AWS_SECRET_ACCESS_KEY"] == "" {
		t.Error("no AWS_ credentials for the bucket")
	}
	if !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/var/lib/strata") }) {
		t.Errorf("volumes %v: none on the image's data directory /var/lib/strata", s.Volumes)
	}
}
