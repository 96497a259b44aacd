package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// TestServeEnvironment starts `strata serve` with settings from a
// properties file, STRATA_ environment variables and --set, and reads the
// effective values back with DescribeConfigs and a topic's partitions:
// the environment beats the file, a flag and --set beat the environment.
func TestServeEnvironment(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "server.properties")
	props := "num.partitions=1\nlog.retention.ms=1000\nlog.segment.bytes=1048576\nlog.retention.hours=1\n"
	if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Args: []string{"--config", file},
		Env: []string{
			"STRATA_BROKER_ID=5",               // beaten by --broker-id 0 (testenv passes it)
			"STRATA_NUM_PARTITIONS=3",          // beats the file
			"STRATA_LOG_RETENTION_MS=2000",     // beaten by --set
			"STRATA_LOG_ROLL_HOURS=2",          // not in the file
			"STRATA_MESSAGE_MAX_BYTES=2000000", // read back below
			"STRATA_BOOTSTRAP=127.0.0.1:1",     // another program's: ignored
			"STRATA_CHAOS_SEED=1",              // the harness's: ignored
		},
		Sets: []string{"log.retention.ms=3000"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b.Addr()))
	rcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	want := map[string]string{
		"broker.id":         "0",
		"num.partitions":    "3",
		"log.retention.ms":  "3000",
		"log.roll.hours":    "2",
		"message.max.bytes": "2000000",
		"log.segment.bytes": "1048576",
	}
	got := map[string]string{}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if _, ok := want[c.Key]; ok {
				got[c.Key] = c.MaybeValue()
				if c.Source != kmsg.ConfigSourceStaticBrokerConfig {
					t.Errorf("%s: source %v, want STATIC_BROKER_CONFIG", c.Key, c.Source)
				}
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// num.partitions from the environment shapes a new topic.
	r, err := adm.CreateTopic(ctx, -1, 1, nil, "env-default")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	td, err := adm.ListTopics(ctx, "env-default")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["env-default"].Partitions); n != 3 {
		t.Errorf("topic created with the default has %d partitions, want 3 (STRATA_NUM_PARTITIONS)", n)
	}
}

// TestServeEnvironmentUnknownSetting: a STRATA_ variable that looks like
// a setting but is none stops `strata serve` with a one-line reason
// naming it.
func TestServeEnvironmentUnknownSetting(t *testing.T) {
	bin := testenv.BuildStrata(t)
	for env, mention := range map[string]string{
		"STRATA_LOG_RETENTON_MS=5": "STRATA_LOG_RETENTON_MS",
		"STRATA_TIER=file:///x":    "--tier",
		"STRATA_NUM_PARTITIONS=0":  "num.partitions",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
		cmd.Env = append(os.Environ(), env)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		reason := strings.TrimSpace(stderr.String())
		switch {
		case err == nil:
			t.Errorf("%s: strata serve exited 0", env)
		case strings.Contains(stdout.String(), "ready "):
			t.Errorf("%s: printed a ready line", env)
		case strings.Contains(reason, "\n") || !strings.Contains(reason, mention):
			t.Errorf("%s: reason %q, want one line naming %s", env, reason, mention)
		}
	}
}

// TestServeEnvironmentNodeID: without --broker-id, STRATA_NODE_ID (KRaft's
// name, which apache/kafka users set) names the broker; --broker-id's
// default no longer shadows it.
func TestServeEnvironmentNodeID(t *testing.T) {
	bin := testenv.BuildStrata(t)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "STRATA_NODE_ID=7")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				line <- sc.Text()
				return
			}
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			t.Fatalf("exited before ready:\n%s", stderr.String())
		}
		if !strings.HasPrefix(l, "ready broker_id=7 ") {
			t.Errorf("ready line %q, want broker_id=7 from STRATA_NODE_ID", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no ready line within 30s:\n%s", stderr.String())
	}
}
