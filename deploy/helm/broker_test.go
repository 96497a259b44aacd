package helm

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"

	"strata/internal/testenv"
)

// TestBrokersRunChartConfig starts two real brokers the way the chart's
// pods do, on ZooKeeper and a MinIO bucket: the rack init container's
// script writes each one's server.properties from the ConfigMap (here
// with a stand-in for the API server's Node), and each runs with the
// StatefulSet's arguments, with its pod index for $(POD_INDEX). Only
// what cannot work outside a cluster is swapped: the addresses (loopback
// and free ports for 0.0.0.0 and the pod DNS names), the ZooKeeper and
// bucket addresses, and the data directory. Both register under their
// pod index with their node's zone as rack, serve /healthz on the
// metrics port, and stop cleanly on SIGTERM well within the pod's grace
// period.
func TestBrokersRunChartConfig(t *testing.T) {
	m := render(t, "testdata/default.yaml")
	sts, c := brokers(t, m)
	cm := m.get(t, "ConfigMap", fullname).(*corev1.ConfigMap)
	grace := time.Duration(*sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second

	zk := testenv.StartZooKeeper(t)
	mio := testenv.SharedMinIO(t)
	for _, kv := range mio.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	bucket := mio.NewBucket(t)
	chroot := "/strata"
	if v, _ := flagValue(c.Args, "zookeeper"); !strings.HasSuffix(v, chroot) {
		t.Fatalf("--zookeeper %q: the test expects the chroot %s of testdata/default.yaml", v, chroot)
	}

	zones := []string{"eu-west-1a", "eu-west-1b"}
	var started []*testenv.Broker
	for i, zone := range zones {
		props, log, err := runRackScript(t, cm, fmt.Sprintf(`"kubernetes.io/hostname":"node-a","topology.kubernetes.io/zone":%q`, zone), true)
		if err != nil {
			t.Fatalf("rack script: %v\n%s", err, log)
		}
		var args []string
		for _, a := range c.Args {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			switch name {
			case "listen", "advertise", "data-dir":
				continue // testenv's loopback address and directory
			case "zookeeper":
				a = "--zookeeper=" + zk.Addr() + chroot
			case "tier":
				a = "--tier=s3://" + bucket + "/cluster"
				args = append(args, "--s3-endpoint="+mio.Endpoint(), "--s3-region="+testenv.MinIORegion)
			case "metrics":
				a = "--metrics=127.0.0.1:0"
			case "config":
				a = "--config=" + props
			}
			args = append(args, strings.ReplaceAll(a, "$(POD_INDEX)", strconv.Itoa(i)))
		}
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: 99, Args: args})
		started = append(started, b)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(started[0].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		md, err := adm.Metadata(ctx)
		cancel()
		got := map[int32]string{}
		if err == nil {
			for _, b := range md.Brokers {
				if b.Rack != nil {
					got[b.NodeID] = *b.Rack
				} else {
					got[b.NodeID] = ""
				}
			}
		}
		if err == nil && len(got) == 2 && got[0] == zones[0] && got[1] == zones[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("brokers and racks in metadata: %v (err %v), want 0:%s 1:%s", got, err, zones[0], zones[1])
		}
		time.Sleep(200 * time.Millisecond)
	}

	for i, b := range started {
		addr := b.MetricsAddr()
		if addr == "" {
			t.Fatalf("broker %d logged no metrics address", i)
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("broker %d /healthz: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("broker %d /healthz: %s", i, resp.Status)
		}
	}

	began := time.Now()
	started[1].Stop() // SIGTERM, as the kubelet sends: a controlled shutdown
	if d := time.Since(began); d > grace/2 {
		t.Errorf("broker 1 took %v to stop on SIGTERM; the pod's grace period is %v", d, grace)
	}
}

// runRackScript runs the chart's rack init script as the init container
// would, with a stand-in for curl that answers the API server's Node JSON
// with these labels (a JSON object's members), and returns the path of the
// server.properties it writes and its output.
func runRackScript(t *testing.T, cm *corev1.ConfigMap, labels string, required bool) (props, log string, err error) {
	t.Helper()
	dir := t.TempDir()
	etc, out, bin := filepath.Join(dir, "etc"), filepath.Join(dir, "out"), filepath.Join(dir, "bin")
	for _, d := range []string{etc, out, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// As the API server writes it: compact, annotations and managed
	// fields (which name the label key too) after the labels.
	node := `{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a","labels":{` + labels +
		`},"annotations":{"note":"x"},"managedFields":[{"fieldsV1":{"f:metadata":{"f:labels":{"f:topology.kubernetes.io/zone":{}}}}}]}}`
	files := map[string]string{
		filepath.Join(bin, "curl"):              "#!/bin/sh\ncat \"$NODE_FILE\"\n",
		filepath.Join(dir, "node.json"):         node,
		filepath.Join(dir, "token"):             "t",
		filepath.Join(etc, "server.properties"): cm.Data["server.properties"],
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := strings.NewReplacer("/etc/strata/", etc+"/", "/var/run/strata/", out+"/", "/var/run/secrets/strata-rack", dir).Replace(cm.Data["rack.sh"])
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "NODE_FILE=" + filepath.Join(dir, "node.json"),
		"NODE_NAME=node-a", "RACK_LABEL=topology.kubernetes.io/zone", "RACK_REQUIRED=" + strconv.FormatBool(required)}
	b, err := cmd.CombinedOutput()
	return filepath.Join(out, "server.properties"), string(b), err
}
