package config

import (
	"strings"
	"testing"
)

// TestZooKeeperAuth: zookeeper.set.acl needs both credentials, refused in
// one line that never shows the password; the password is sensitive in
// DescribeConfigs.
func TestZooKeeperAuth(t *testing.T) {
	b := mustLoad(t, map[string]string{"zookeeper.connect": "zk:2181/strata", "zookeeper.set.acl": "true",
		"zookeeper.digest.user": "strata", "zookeeper.digest.password": "hunter2"})
	if !b.ZooKeeperSetACL || b.ZooKeeperDigestUser != "strata" || b.ZooKeeperDigestPassword != "hunter2" {
		t.Errorf("set.acl=%v user=%q password set=%v", b.ZooKeeperSetACL, b.ZooKeeperDigestUser, b.ZooKeeperDigestPassword != "")
	}
	if len(b.Ignored) != 0 {
		t.Errorf("ignored %v: zookeeper.set.acl is applied now", b.Ignored)
	}
	if d := mustLoad(t, map[string]string{}); d.ZooKeeperSetACL {
		t.Error("zookeeper.set.acl defaults to true")
	}
	cs := DescribeBroker(b.Resolver(nil), DescribeOptions{Version: 4})
	if c := find(t, cs, "zookeeper.digest.password"); !c.IsSensitive || c.Value != nil {
		t.Errorf("zookeeper.digest.password: sensitive=%v value=%v", c.IsSensitive, c.Value)
	}
	for _, tt := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"zookeeper.set.acl": "true"}, "zookeeper.set.acl=true needs ZooKeeper credentials: set zookeeper.digest.user and zookeeper.digest.password"},
		{map[string]string{"zookeeper.set.acl": "true", "zookeeper.digest.password": "hunter2"}, "zookeeper.digest.password is set without zookeeper.digest.user"},
		{map[string]string{"zookeeper.digest.user": "strata"}, "zookeeper.digest.user is set without zookeeper.digest.password"},
		{map[string]string{"zookeeper.digest.user": "a:b", "zookeeper.digest.password": "hunter2"}, "must not contain ':'"},
	} {
		_, err := Load(tt.props)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", tt.props, err, tt.want)
		}
	}
}
