package broker

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/vfs"
)

// The descriptor budget's formula (fd_budget.go) at a few limits.
func TestDescriptorBudgetFormula(t *testing.T) {
	old := nofileLimit
	t.Cleanup(func() { nofileLimit = old })
	for _, c := range []struct {
		limit, conns, parts int64
	}{
		{256, 64, 21},
		{1024, 448, 149},
		{1 << 20, 524224, 174741},
		{100, 16, 0},
	} {
		nofileLimit = c.limit
		if got := defaultMaxConnections(); got != c.conns {
			t.Errorf("RLIMIT_NOFILE %d: max.connections %d, want %d", c.limit, got, c.conns)
		}
		if got := partitionBudget(defaultMaxConnections()); got != c.parts {
			t.Errorf("RLIMIT_NOFILE %d: %d partitions, want %d", c.limit, got, c.parts)
		}
	}
	// An operator's max.connections takes at most half: partitions keep
	// the other half.
	nofileLimit = 256
	if got := partitionBudget(1 << 30); got != 21 {
		t.Errorf("max.connections 2^30: %d partitions, want 21", got)
	}
	if got := partitionBudget(10); got != 39 {
		t.Errorf("max.connections 10: %d partitions, want 39", got)
	}
	nofileLimit = 0
	if got := partitionBudget(64); got >= 0 {
		t.Errorf("unknown limit: budget %d, want unbounded", got)
	}
}

// CreateTopics and CreatePartitions past the budget are refused with
// INVALID_PARTITIONS and a message naming the limit; within it they work;
// max.connections defaults from the limit unless set.
func TestCreateTopicsPastDescriptorBudget(t *testing.T) {
	ts := startTestServer(t, nil)
	old := nofileLimit
	nofileLimit = 256 // 21 partitions
	t.Cleanup(func() { nofileLimit = old })
	rc := dialRaw(t, ts.addr())

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	for _, n := range []int32{15, 15} { // the second passes the budget with the first
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t"+string(rune('a'+len(req.Topics))), n, 1
		req.Topics = append(req.Topics, rt)
	}
	resp := rc.do(req, 7).(*kmsg.CreateTopicsResponse)
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("15 partitions of a budget of 21: %v", kerr.ErrorForCode(c))
	}
	second := resp.Topics[1]
	if second.ErrorCode != kerr.InvalidPartitions.Code || second.ErrorMessage == nil || !strings.Contains(*second.ErrorMessage, "ulimit -n") {
		t.Fatalf("15 more: %v %v, want INVALID_PARTITIONS naming ulimit -n", kerr.ErrorForCode(second.ErrorCode), second.ErrorMessage)
	}
	t.Log(*second.ErrorMessage)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 10000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "ta", 30
	cp.Topics = append(cp.Topics, ct)
	if c := rc.do(cp, 3).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; c != kerr.InvalidPartitions.Code {
		t.Fatalf("growing to 30 partitions: %v, want INVALID_PARTITIONS", kerr.ErrorForCode(c))
	}
	cp.Topics[0].Count = 20
	if c := rc.do(cp, 3).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; c != 0 {
		t.Fatalf("growing to 20 partitions: %v", kerr.ErrorForCode(c))
	}

	if got := ts.connLimits().MaxConnections; got != 64 {
		t.Fatalf("max.connections unset under RLIMIT_NOFILE 256: %d, want 64", got)
	}
}

// Partitions that cannot be opened for lack of descriptors (EMFILE on
// their files, issue 25) are not a disk failure: CreateTopics answers a
// retriable KAFKA_STORAGE_ERROR saying so, the log directory stays
// online, and the partitions open a second later once descriptors are
// free, and take produces.
func TestCreateTopicsOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	ff := vfs.NewFaultFS(vfs.OS)
	ts := startServerFS(t, dir, ff, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("before", 1, nil)
	rc.produceOK("before", 0, plainBatch(time.Now().UnixMilli(), "a").build(t))

	ff.SetInjector(vfs.FailWith(vfs.OpOpen, string(filepath.Separator)+"late-", syscall.EMFILE))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "late", 3, 1
	req.Topics = append(req.Topics, rt)
	got := rc.do(req, 7).(*kmsg.CreateTopicsResponse).Topics[0]
	if got.ErrorCode != kerr.KafkaStorageError.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "no file descriptor left") {
		t.Fatalf("CreateTopics out of descriptors: %v %v, want KAFKA_STORAGE_ERROR saying so", kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
	}
	t.Log(*got.ErrorMessage)
	time.Sleep(1500 * time.Millisecond) // a retry fails too
	if err := ts.logDirErr(); err != nil {
		t.Fatalf("log directory offline: %v", err)
	}
	ff.SetInjector(nil)
	waitFor(t, "partitions opened", 5*time.Second, func() bool {
		for p := range int32(3) {
			if ts.partition("late", p) == nil {
				return false
			}
		}
		return true
	})
	for p := range int32(3) {
		rc.produceOK("late", p, plainBatch(time.Now().UnixMilli(), "b").build(t))
	}
	rc.produceOK("before", 0, plainBatch(time.Now().UnixMilli(), "c").build(t))
}
