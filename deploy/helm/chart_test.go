// Package helm tests the Helm chart in strata/: no cluster runs here, so
// the chart is rendered with Helm v4's own engine for each values file in
// testdata/, and every manifest is decoded strictly into the Kubernetes API
// types (an unknown or misspelt field, a wrong type or a duplicate key
// fails). The commands the chart runs are checked against the real
// strata binary and configuration loader.
//
// The package holds tests only, so that Helm's and Kubernetes' modules are
// compiled for this package alone.
package helm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"strata/broker/config"
	"strata/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	chartDir  = "strata"
	release   = "demo"
	namespace = "streaming"
	// The cluster's API groups when the Prometheus operator is installed.
	promOperatorAPI = "monitoring.coreos.com/v1"
)

// manifests is a rendered chart: its objects by kind and name.
type manifests struct {
	objs  map[string]any // "Kind/name" -> typed object
	notes string
}

func (m *manifests) get(t *testing.T, kind, name string) any {
	t.Helper()
	o, ok := m.objs[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s %q rendered; have %v", kind, name, m.names())
	}
	return o
}

func (m *manifests) has(kind, name string) bool {
	_, ok := m.objs[kind+"/"+name]
	return ok
}

func (m *manifests) names() []string {
	var n []string
	for k := range m.objs {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// renderRaw renders the chart with the values file and the extra API
// versions, as `helm template --api-versions` would, and returns each
// template's output.
func renderRaw(valuesFile string, apiVersions ...string) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	vals := common.Values{}
	if valuesFile != "" {
		if vals, err = common.ReadValuesFile(valuesFile); err != nil {
			return nil, fmt.Errorf("read %s: %w", valuesFile, err)
		}
	}
	caps := common.DefaultCapabilities.Copy()
	kv, err := common.ParseKubeVersion("v1.31.0")
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	caps.APIVersions = append(slices.Clone(caps.APIVersions), apiVersions...)
	opts := common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 7, IsUpgrade: true}
	rv, err := util.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return engine.Engine{Strict: true}.Render(ch, rv)
}

// render renders the chart and decodes every manifest strictly.
func render(t *testing.T, valuesFile string, apiVersions ...string) *manifests {
	t.Helper()
	out, err := renderRaw(valuesFile, apiVersions...)
	if err != nil {
		t.Fatalf("render with %s: %v", valuesFile, err)
	}
	m := &manifests{objs: map[string]any{}}
	files := make([]string, 0, len(out))
	for f := range out {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, "NOTES.txt"):
			m.notes = out[f]
			continue
		case strings.HasPrefix(filepath.Base(f), "_"):
			continue
		}
		docs := releaseutil.SplitManifests(out[f])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			obj, kind, name, err := decodeStrict([]byte(docs[k]))
			if err != nil {
				t.Errorf("%s: %v\n%s", f, err, docs[k])
				continue
			}
			if obj == nil {
				continue // only comments
			}
			key := kind + "/" + name
			if _, dup := m.objs[key]; dup {
				t.Errorf("%s: %s rendered twice", f, key)
			}
			m.objs[key] = obj
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

// decodeStrict decodes one manifest into its Kubernetes API type, failing
// on a field the type does not have, a value of the wrong type, or a
// duplicate key. A document of comments alone is (nil, nil).
func decodeStrict(doc []byte) (obj any, kind, name string, err error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, "", "", fmt.Errorf("not YAML: %w", err)
	}
	if head.APIVersion == "" && head.Kind == "" {
		var any map[string]any
		if err := yaml.Unmarshal(doc, &any); err != nil || len(any) > 0 {
			return nil, "", "", fmt.Errorf("a manifest without apiVersion and kind")
		}
		return nil, "", "", nil
	}
	switch head.APIVersion + "/" + head.Kind {
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "apps/v1/StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		obj = &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		obj = &rbacv1.ClusterRoleBinding{}
	case "batch/v1/Job":
		obj = &batchv1.Job{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		obj = &monitoringv1.ServiceMonitor{}
	default:
		return nil, "", "", fmt.Errorf("%s %s: a kind this test does not know; add its API type", head.APIVersion, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, "", "", fmt.Errorf("%s %q: %w", head.Kind, head.Metadata.Name, err)
	}
	if head.Metadata.Name == "" {
		return nil, "", "", fmt.Errorf("%s without a name", head.Kind)
	}
	if !strings.HasPrefix(head.Kind, "Cluster") && head.Metadata.Namespace != namespace {
		return nil, "", "", fmt.Errorf("%s %q: namespace %q, want the release's %q", head.Kind, head.Metadata.Name, head.Metadata.Namespace, namespace)
	}
	return obj, head.Kind, head.Metadata.Name, nil
}

const fullname = release + "-strata"

func brokers(t *testing.T, m *manifests) (*appsv1.StatefulSet, *corev1.Container) {
	t.Helper()
	sts := m.get(t, "StatefulSet", fullname).(*appsv1.StatefulSet)
	for i := range sts.Spec.Template.Spec.Containers {
		if c := &sts.Spec.Template.Spec.Containers[i]; c.Name == "broker" {
			return sts, c
		}
	}
	t.Fatal("no broker container")
	return nil, nil
}

func envVar(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// flagValue is the value of --name=VALUE in args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestDefault(t *testing.T) {
	m := render(t, "testdata/default.yaml")
	sts, c := brokers(t, m)
	spec := sts.Spec.Template.Spec

	if got := *sts.Spec.Replicas; got != 3 {
		t.Errorf("replicas %d, want 3", got)
	}
	// The broker id is the pod index.
	if v, _ := flagValue(c.Args, "broker-id"); v != "$(POD_INDEX)" {
		t.Errorf("--broker-id %q, want $(POD_INDEX)", v)
	}
	if e := envVar(c, "POD_INDEX"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
		e.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("POD_INDEX env %+v, want the pod-index label", e)
	}
	if v, _ := flagValue(c.Args, "advertise"); v != "$(POD_NAME)."+fullname+"-headless."+namespace+".svc.cluster.local:9092" {
		t.Errorf("--advertise %q", v)
	}
	if v, _ := flagValue(c.Args, "zookeeper"); v != "zk-0.zk:2181,zk-1.zk:2181,zk-2.zk:2181/strata" {
		t.Errorf("--zookeeper %q", v)
	}
	if v, _ := flagValue(c.Args, "tier"); v != "s3://strata-prod/cluster-a" {
		t.Errorf("--tier %q", v)
	}
	// No static keys: the AWS default chain (the pod's identity).
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "AWS_") || strings.HasPrefix(e.Name, "STRATA_") {
			t.Errorf("env %s set; want none (credentials from the pod's identity, no STRATA_ settings)", e.Name)
		}
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks not false: Services would add STRATA_* variables to the broker's environment")
	}

	// Probes on the metrics port: /readyz for readiness, /healthz for
	// liveness and startup.
	metricsPort := int32(0)
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if v, _ := flagValue(c.Args, "metrics"); v != fmt.Sprintf("0.0.0.0:%d", metricsPort) || metricsPort == 0 {
		t.Errorf("--metrics %q, metrics port %d", v, metricsPort)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe: none", p.what)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || g.Port.String() != "metrics" {
			t.Errorf("%s probe %s on %s, want %s on metrics", p.what, g.Path, g.Port.String(), p.path)
		}
	}

	// Controlled shutdown on SIGTERM, with time for its retries; nothing in
	// preStop (a restart must not decommission the broker).
	props := serverProperties(t, m)
	b := loadConfig(t, props, c.Args)
	need := int64(b.ControlledShutdownMaxRetries+1) * (b.ControlledShutdownRetryBackoffMs/1000 + 30)
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < need {
		t.Errorf("terminationGracePeriodSeconds %v, want at least %d for a controlled shutdown with its retries", g, need)
	}
	for _, ct := range append(slices.Clone(spec.Containers), spec.InitContainers...) {
		if ct.Lifecycle != nil {
			t.Errorf("container %s has lifecycle hooks %+v; a restart must only stop the broker (SIGTERM)", ct.Name, ct.Lifecycle)
		}
	}

	// The volume holds the local tail: one claim, and tiered storage on.
	if n := len(sts.Spec.VolumeClaimTemplates); n != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Errorf("volume claim templates %d, want one named data", n)
	}
	if !b.RemoteLogStorageSystemEnable {
		t.Error("remote.log.storage.system.enable off: the brokers would keep every segment locally")
	}

	// The rack from the node's label, through the init container.
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "rack" {
		t.Fatalf("init containers %v, want rack", spec.InitContainers)
	}
	if v, _ := flagValue(c.Args, "config"); v != "/var/run/strata/server.properties" {
		t.Errorf("--config %q, want the file the rack init container writes", v)
	}
	if b.ReplicaSelectorClass != config.RackAwareReplicaSelector {
		t.Errorf("replica.selector.class %q, want fetch from follower", b.ReplicaSelectorClass)
	}
	role := m.get(t, "ClusterRole", fullname+"-"+namespace+"-node-reader").(*rbacv1.ClusterRole)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"nodes"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("node reader rules %+v, want get nodes only", role.Rules)
	}
	m.get(t, "ClusterRoleBinding", fullname+"-"+namespace+"-node-reader")
	checkRackScript(t, m)

	pdb := m.get(t, "PodDisruptionBudget", fullname).(*policyv1.PodDisruptionBudget)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("PDB selects %s=%s, which the broker pods lack", k, v)
		}
	}
	headless := m.get(t, "Service", fullname+"-headless").(*corev1.Service)
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses || sts.Spec.ServiceName != headless.Name {
		t.Errorf("headless service %+v, StatefulSet serviceName %q", headless.Spec, sts.Spec.ServiceName)
	}
	m.get(t, "Service", fullname)
	m.get(t, "ServiceAccount", fullname)

	// Without the Prometheus operator, no ServiceMonitor; no scaling Job.
	for k := range m.objs {
		if strings.HasPrefix(k, "ServiceMonitor/") || strings.HasPrefix(k, "Job/") {
			t.Errorf("%s rendered by default", k)
		}
	}
	checkServeArgs(t, c)
}

// TestLint runs Helm's own linter over the chart (as `helm lint` does)
// with each values file: Chart.yaml, values, templates and the rendered
// YAML. Any warning or error fails.
func TestLint(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files: %v", err)
	}
	kv, err := common.ParseKubeVersion("v1.31.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		vals, err := common.ReadValuesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		l := lint.RunAll(chartDir, vals, namespace, lint.WithKubeVersion(kv))
		for _, msg := range l.Messages {
			if msg.Severity >= support.WarningSev {
				t.Errorf("helm lint with %s: %s", f, msg)
			}
		}
	}
	// The linter does report: a copy of the chart with a template that is
	// not YAML fails it.
	broken := filepath.Join(t.TempDir(), "strata")
	if err := os.CopyFS(broken, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "templates", "broken.yaml"), []byte("apiVersion: v1\nkind: [ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vals, err := common.ReadValuesFile("testdata/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := lint.RunAll(broken, vals, namespace, lint.WithKubeVersion(kv)); l.HighestSeverity < support.ErrorSev {
		t.Errorf("helm lint of a chart with a broken template: %v, want an error", l.Messages)
	}
}

// TestServiceMonitor: with the Prometheus operator's API the chart adds a
// ServiceMonitor for the brokers' metrics port.
func TestServiceMonitor(t *testing.T) {
	m := render(t, "testdata/default.yaml", promOperatorAPI)
	sm := m.get(t, "ServiceMonitor", fullname).(*monitoringv1.ServiceMonitor)
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("endpoints %+v, want port metrics, /metrics", sm.Spec.Endpoints)
	}
	// It selects the headless Service alone (every broker, ready or not;
	// no broker scraped twice).
	var selected []string
	for k, o := range m.objs {
		if svc, ok := o.(*corev1.Service); ok {
			match := true
			for lk, lv := range sm.Spec.Selector.MatchLabels {
				match = match && svc.Labels[lk] == lv
			}
			if match {
				selected = append(selected, k)
			}
		}
	}
	if !slices.Equal(selected, []string{"Service/" + fullname + "-headless"}) {
		t.Errorf("ServiceMonitor selects %v, want the headless Service alone", selected)
	}
}

func TestEnsemble(t *testing.T) {
	m := render(t, "testdata/ensemble.yaml")
	zk := m.get(t, "StatefulSet", fullname+"-zookeeper").(*appsv1.StatefulSet)
	if *zk.Spec.Replicas != 3 {
		t.Errorf("ensemble replicas %d", *zk.Spec.Replicas)
	}
	var servers string
	for _, e := range zk.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "ZOO_SERVERS" {
			servers = e.Value
		}
	}
	host := func(i int) string {
		return fmt.Sprintf("%s-zookeeper-%d.%s-zookeeper-headless.%s.svc.cluster.local", fullname, i, fullname, namespace)
	}
	want := fmt.Sprintf("server.1=%s:2888:3888;2181 server.2=%s:2888:3888;2181 server.3=%s:2888:3888;2181", host(0), host(1), host(2))
	if servers != want {
		t.Errorf("ZOO_SERVERS\n %q, want\n %q", servers, want)
	}
	_, c := brokers(t, m)
	if v, _ := flagValue(c.Args, "zookeeper"); v != fmt.Sprintf("%s:2181,%s:2181,%s:2181/strata", host(0), host(1), host(2)) {
		t.Errorf("--zookeeper %q", v)
	}
	m.get(t, "Service", fullname+"-zookeeper-headless")
	m.get(t, "PodDisruptionBudget", fullname+"-zookeeper")
}

func TestIRSA(t *testing.T) {
	m := render(t, "testdata/irsa.yaml")
	sa := m.get(t, "ServiceAccount", fullname).(*corev1.ServiceAccount)
	if sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::123456789012:role/strata-tier" {
		t.Errorf("service account annotations %v", sa.Annotations)
	}
	sts, c := brokers(t, m)
	if sts.Spec.Template.Spec.ServiceAccountName != sa.Name {
		t.Errorf("pods run as %q, not the annotated %q", sts.Spec.Template.Spec.ServiceAccountName, sa.Name)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "AWS_") {
			t.Errorf("env %s: with IRSA the chart sets no AWS credentials", e.Name)
		}
	}
	for flag, want := range map[string]string{"s3-region": "eu-west-1", "s3-sse": "aws:kms", "s3-sse-kms-key-id": "alias/strata"} {
		if v, _ := flagValue(c.Args, flag); v != want {
			t.Errorf("--%s %q, want %q", flag, v, want)
		}
	}
	// rack.source=podLabel: the pod's topology label through the
	// downward API; no init container, no node reader role.
	if v, _ := flagValue(c.Args, "set"); v != "broker.rack=$(BROKER_RACK)" {
		t.Errorf("--set %q, want broker.rack=$(BROKER_RACK)", v)
	}
	if e := envVar(c, "BROKER_RACK"); e == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.labels['topology.kubernetes.io/zone']" {
		t.Errorf("BROKER_RACK %+v", e)
	}
	if n := len(sts.Spec.Template.Spec.InitContainers); n != 0 {
		t.Errorf("%d init containers with rack.source=podLabel", n)
	}
	for k := range m.objs {
		if strings.HasPrefix(k, "ClusterRole") {
			t.Errorf("%s rendered with rack.source=podLabel", k)
		}
	}
	if v, _ := flagValue(c.Args, "config"); v != "/etc/strata/server.properties" {
		t.Errorf("--config %q", v)
	}
	checkServeArgs(t, c)
	loadConfig(t, serverProperties(t, m), c.Args)
}

func TestSecret(t *testing.T) {
	m := render(t, "testdata/secret.yaml")
	sts, c := brokers(t, m)
	for name, key := range map[string]string{"AWS_ACCESS_KEY_ID": "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN": "AWS_SESSION_TOKEN"} {
		e := envVar(c, name)
		if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "strata-s3" || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("%s: %+v, want key %s of Secret strata-s3", name, e, key)
		}
	}
	if v, _ := flagValue(c.Args, "s3-endpoint"); v != "http://minio.storage.svc:9000" {
		t.Errorf("--s3-endpoint %q", v)
	}
	if *sts.Spec.Replicas != 5 {
		t.Errorf("replicas %d", *sts.Spec.Replicas)
	}
	if q := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "500Gi" {
		t.Errorf("volume %s", q.String())
	}
	props := serverProperties(t, m)
	if props["log.local.retention.bytes"] != "1073741824" {
		t.Errorf("log.local.retention.bytes %q, want 1073741824 (a YAML number printed whole)", props["log.local.retention.bytes"])
	}
	b := loadConfig(t, props, c.Args)
	if b.NumPartitions != 6 || b.AutoCreateTopicsEnable {
		t.Errorf("config from values: num.partitions %d, auto.create.topics.enable %v", b.NumPartitions, b.AutoCreateTopicsEnable)
	}
	if b.ReplicaSelectorClass != "" || b.Rack != nil {
		t.Errorf("rack.source=none, yet replica.selector.class %q, broker.rack %v", b.ReplicaSelectorClass, b.Rack)
	}
	if len(sts.Spec.Template.Spec.InitContainers) != 0 {
		t.Error("init container with rack.source=none")
	}
	checkServeArgs(t, c)
}

// TestScalingJobs: the values switch renders `strata admin` as a Job whose
// command line the real binary accepts.
func TestScalingJobs(t *testing.T) {
	for _, tc := range []struct {
		file, job, hook string
		want            []string // the admin words after --bootstrap
	}{
		{"testdata/rebalance.yaml", fullname + "-rebalance", "post-upgrade",
			[]string{"cluster", "rebalance", "--execute", "--throttle=50000000", "--timeout=60m"}},
		{"testdata/decommission.yaml", fullname + "-decommission", "pre-upgrade",
			[]string{"broker", "decommission", "2", "--execute", "--throttle=0", "--timeout=120m"}},
		{"testdata/decommission-plain.yaml", fullname + "-decommission-7", "",
			[]string{"broker", "decommission", "2", "--execute", "--throttle=0", "--timeout=60m"}},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			m := render(t, tc.file)
			job := m.get(t, "Job", tc.job).(*batchv1.Job)
			if got := job.Annotations["helm.sh/hook"]; got != tc.hook {
				t.Errorf("helm.sh/hook %q, want %q", got, tc.hook)
			}
			pod := job.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			cmd := pod.Containers[0].Command
			if len(cmd) < 3 || cmd[0] != "/usr/local/bin/strata" || cmd[1] != "admin" || cmd[2] != "--bootstrap="+fullname+"."+namespace+".svc.cluster.local:9092" {
				t.Fatalf("command %q", cmd)
			}
			if !slices.Equal(cmd[3:], tc.want) {
				t.Errorf("admin args %q, want %q", cmd[3:], tc.want)
			}
			if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d <= 60*60 {
				t.Errorf("activeDeadlineSeconds %v, not above the command's timeout", d)
			}
			if strings.Contains(tc.job, "rebalance") {
				// It waits for every broker of the new size before planning.
				if len(pod.InitContainers) != 1 || !strings.Contains(pod.InitContainers[0].Command[2], "$(seq 0 3)") {
					t.Errorf("rebalance Job does not wait for brokers 0..3: %+v", pod.InitContainers)
				}
			}
			checkAdminCommand(t, cmd[1:])
			if !strings.Contains(m.notes, "job/"+tc.job) {
				t.Errorf("NOTES do not name job/%s:\n%s", tc.job, m.notes)
			}
		})
	}
}

// TestScalingJobIsNotARestart: the StatefulSet and its pods are the same
// whether or not a scaling Job runs, so no broker restarts for it, and no
// pod ever decommissions itself.
func TestScalingJobIsNotARestart(t *testing.T) {
	base, err := os.ReadFile("testdata/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	job := "replicas: 2\nscaling: {job: decommission, brokerId: 2}\n"
	if err := os.WriteFile(f, append(base, job...), 0o644); err != nil {
		t.Fatal(err)
	}
	m := render(t, f)
	m.get(t, "Job", fullname+"-decommission")
	scaled, _ := brokers(t, m)
	plain, _ := brokers(t, render(t, "testdata/default.yaml"))
	a, _ := yaml.Marshal(plain.Spec.Template)
	b, _ := yaml.Marshal(scaled.Spec.Template)
	if !bytes.Equal(a, b) {
		t.Errorf("the pod template changes with scaling.job: every broker would restart")
	}
	if bytes.Contains(a, []byte("decommission")) {
		t.Error("the broker pods mention decommission")
	}
}

// TestBadValues: values the chart cannot work with fail the render with a
// message naming the value.
func TestBadValues(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"no bucket", "zookeeper: {connect: zk:2181}\n", "tier.url: set the bucket"},
		{"file tier", "tier: {url: file:///data}\nzookeeper: {connect: zk:2181}\n", `tier.url "file:///data": want s3://`},
		{"no zookeeper", "tier: {url: s3://b/p}\n", "zookeeper: set zookeeper.connect"},
		{"rack source", "tier: {url: s3://b/p}\nzookeeper: {connect: zk:2181}\nrack: {source: zone}\n", `rack.source "zone"`},
		{"pod label", "tier: {url: s3://b/p}\nzookeeper: {connect: zk:2181}\nrack: {source: podLabel, nodeLabel: example.com/rack}\n", `rack.nodeLabel "example.com/rack"`},
		{"job", "tier: {url: s3://b/p}\nzookeeper: {connect: zk:2181}\nscaling: {job: drain}\n", `scaling.job "drain"`},
		{"no broker id", "tier: {url: s3://b/p}\nzookeeper: {connect: zk:2181}\nscaling: {job: decommission}\n", "scaling.brokerId: scaling.job=decommission needs"},
		{"wrong broker id", "tier: {url: s3://b/p}\nzookeeper: {connect: zk:2181}\nreplicas: 3\nscaling: {job: decommission, brokerId: 1}\n", "removes broker 3"},
		{"ensemble size", "tier: {url: s3://b/p}\nzookeeper: {ensemble: {enabled: true, replicas: 2}}\n", "zookeeper.ensemble.replicas 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(tc.values), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := renderRaw(f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestStrictDecodeCatches shows that the checks above can fail: a
// misspelt field, a wrong type, a duplicate key, a bad broker setting and
// an admin command line the CLI does not accept are each caught.
func TestStrictDecodeCatches(t *testing.T) {
	out, err := renderRaw("testdata/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sts := out[chartDir+"/templates/statefulset.yaml"]
	if _, _, _, err := decodeStrict([]byte(sts)); err != nil {
		t.Fatalf("the rendered StatefulSet does not decode: %v", err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"misspelt field", "readinessProbe:", "readynessProbe:", `unknown field "readynessProbe"`},
		{"misspelt nested field", "podManagementPolicy:", "podManagmentPolicy:", `unknown field "podManagmentPolicy"`},
		{"wrong type", "terminationGracePeriodSeconds: 180", "terminationGracePeriodSeconds: three minutes", "terminationGracePeriodSeconds"},
		{"duplicate key", "  serviceName:", "  replicas: 4\n  serviceName:", `"replicas" already set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(sts, tc.old) {
				t.Fatalf("rendered StatefulSet has no %q", tc.old)
			}
			bad := strings.Replace(sts, tc.old, tc.new, 1)
			_, _, _, err := decodeStrict([]byte(bad))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode: %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("unknown kind", func(t *testing.T) {
		_, _, _, err := decodeStrict([]byte("apiVersion: v1\nkind: Podd\nmetadata: {name: x}\n"))
		if err == nil || !strings.Contains(err.Error(), "Podd") {
			t.Errorf("decode: %v", err)
		}
	})
	t.Run("bad broker setting", func(t *testing.T) {
		props := map[string]string{"broker.id": "0", "min.insync.replica": "2"}
		if _, err := config.Load(props); err == nil {
			t.Error("config.Load accepted a misspelt key")
		}
	})
	t.Run("bad admin command", func(t *testing.T) {
		bin := testenv.BuildStrata(t)
		for _, args := range [][]string{
			{"admin", "--bootstrap=x:9092", "broker", "decommission", "2", "--exectue"},
			{"admin", "--bootstrap=x:9092", "cluster", "rebalanse", "--execute"},
			{"admin", "--bootstrap=x:9092", "broker", "decomission", "2"},
		} {
			if code, out := runHelp(t, bin, args); code == 0 {
				t.Errorf("strata %q --help exited 0:\n%s", args, out)
			}
		}
	})
}

// serverProperties is the server.properties of the chart's ConfigMap, with
// broker.rack as the rack init container would append it.
func serverProperties(t *testing.T, m *manifests) map[string]string {
	t.Helper()
	cm := m.get(t, "ConfigMap", fullname).(*corev1.ConfigMap)
	props, err := config.ParseProperties([]byte(cm.Data["server.properties"]))
	if err != nil {
		t.Fatalf("server.properties: %v\n%s", err, cm.Data["server.properties"])
	}
	return props
}

// loadConfig loads the broker configuration as `strata serve` would from
// the ConfigMap, the chart's flags and --set items, with the pod's
// variables filled in, through the broker's own loader.
func loadConfig(t *testing.T, props map[string]string, args []string) *config.Broker {
	t.Helper()
	props["broker.id"] = "2"
	if v, ok := flagValue(args, "tier"); ok && v != "" {
		props["remote.log.storage.system.enable"] = "true"
	}
	if v, ok := flagValue(args, "zookeeper"); ok {
		props["zookeeper.connect"] = v
	}
	var sets []string
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--set="); ok {
			sets = append(sets, v)
		} else if a == "--set" && i+1 < len(args) {
			sets = append(sets, args[i+1])
		}
	}
	for i, s := range sets {
		sets[i] = strings.ReplaceAll(s, "$(BROKER_RACK)", "eu-west-1a")
	}
	if err := config.ApplySets(props, sets); err != nil {
		t.Fatalf("--set: %v", err)
	}
	b, err := config.Load(props)
	if err != nil {
		t.Fatalf("broker configuration: %v", err)
	}
	return b
}

// checkRackScript runs the rack init container's script with a stand-in
// for curl that answers a Node as the API server does, and checks the
// server.properties it writes; and that a node without the label stops
// the pod when rack.required is set.
func checkRackScript(t *testing.T, m *manifests) {
	t.Helper()
	cm := m.get(t, "ConfigMap", fullname).(*corev1.ConfigMap)
	script := cm.Data["rack.sh"]
	if script == "" {
		t.Fatal("no rack.sh in the ConfigMap")
	}
	for _, tc := range []struct {
		name, labels string
		required     bool
		wantRack     string
		wantFail     bool
	}{
		{"zone", `"kubernetes.io/hostname":"ip-10-0-1-7","topology.kubernetes.io/region":"eu-west-1","topology.kubernetes.io/zone":"eu-west-1b"`, false, "eu-west-1b", false},
		{"no zone", `"kubernetes.io/hostname":"ip-10-0-1-7"`, false, "", false},
		{"no zone, required", `"kubernetes.io/hostname":"ip-10-0-1-7"`, true, "", true},
	} {
		t.Run("rack "+tc.name, func(t *testing.T) {
			path, log, err := runRackScript(t, cm, tc.labels, tc.required)
			if tc.wantFail {
				if err == nil {
					t.Errorf("the script succeeded on a node without the label:\n%s", log)
				}
				return
			}
			if err != nil {
				t.Fatalf("rack script: %v\n%s", err, log)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			props, err := config.ParseProperties(got)
			if err != nil {
				t.Fatal(err)
			}
			if props["broker.rack"] != tc.wantRack {
				t.Errorf("broker.rack %q, want %q\n%s", props["broker.rack"], tc.wantRack, got)
			}
			if base := cm.Data["server.properties"]; !strings.HasPrefix(string(got), base) {
				t.Errorf("the written file does not start with the ConfigMap's:\n%s", got)
			}
		})
	}
}

// podVars fills in the variables Kubernetes expands in a container's
// arguments.
var podVars = strings.NewReplacer("$(POD_INDEX)", "2", "$(POD_NAME)", fullname+"-2", "$(BROKER_RACK)", "eu-west-1a")

// checkServeArgs runs the real strata binary with the broker container's
// command line and --help after it: flag parsing fails on a flag serve
// does not define or a value of the wrong type before it reaches --help.
func checkServeArgs(t *testing.T, c *corev1.Container) {
	t.Helper()
	if len(c.Command) != 2 || c.Command[1] != "serve" {
		t.Fatalf("broker command %q, want [BINARY serve]", c.Command)
	}
	args := []string{"serve"}
	for _, a := range c.Args {
		args = append(args, podVars.Replace(a))
	}
	bin := testenv.BuildStrata(t)
	_, out := runHelp(t, bin, args)
	for _, bad := range []string{"flag provided but not defined", "invalid value", "invalid boolean"} {
		if strings.Contains(out, bad) {
			t.Errorf("strata %q rejects the chart's flags:\n%s", args, out)
		}
	}
	if !strings.Contains(out, "-broker-id") {
		t.Errorf("strata serve --help printed no usage:\n%s", out)
	}
}

// checkAdminCommand runs the real strata binary with the Job's command
// line and --help after it: the subcommand must exist and each flag parse
// (the CLI stops at the first unknown one), and the usage shown must be
// the subcommand's.
func checkAdminCommand(t *testing.T, args []string) {
	t.Helper()
	bin := testenv.BuildStrata(t)
	code, out := runHelp(t, bin, args)
	if code != 0 {
		t.Errorf("strata %q --help exited %d:\n%s", args, code, out)
	}
	sub := args[2] + " " + args[3] // e.g. "cluster rebalance"
	if !strings.Contains(out, sub) || !strings.Contains(out, "--execute") {
		t.Errorf("strata %q --help shows no usage of %q:\n%s", args, sub, out)
	}
}

func runHelp(t *testing.T, bin string, args []string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, append(slices.Clone(args), "--help")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("run strata: %v", err)
	}
	return 0, string(out)
}
