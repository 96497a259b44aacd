package broker

// DescribeLogDirs, v1-4. One log dir (the data directory); per partition
// its size on local disk. v4 adds the directory's total and usable bytes.
// With tiered storage on, a second entry describes the remote tier
// (remoteLogDir): each tiered partition this broker leads with the size
// of its remote log.

import (
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"strata/broker/acl"
	"strata/tier"
)

func init() { register(35, 1, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorizedCluster(cc, acl.OpDescribe) {
		resp.ErrorCode = errClusterAuth // v3+; before, an empty answer
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	abs, err := filepath.Abs(s.cfg.DataDir)
	if err != nil {
		abs = s.cfg.DataDir
	}
	dir.Dir = abs
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var st unix.Statfs_t
	if unix.Statfs(abs, &st) == nil {
		dir.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		dir.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	want := func(string, int32) bool { return true }
	if req.Topics != nil {
		m := map[tp]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				m[tp{t.Topic, p}] = true
			}
		}
		want = func(t string, p int32) bool { return m[tp{t, p}] }
	}
	byTopic := map[string]*kmsg.DescribeLogDirsResponseDirTopic{}
	var names []string
	for _, p := range s.allPartitions() {
		if !want(p.Topic(), p.Index()) {
			continue
		}
		t := byTopic[p.Topic()]
		if t == nil {
			nt := kmsg.NewDescribeLogDirsResponseDirTopic()
			nt.Topic = p.Topic()
			t = &nt
			byTopic[p.Topic()] = t
			names = append(names, p.Topic())
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition = p.Index()
		rp.Size = p.Log().Size()
		rp.OffsetLag = max(0, p.Log().LogEndOffset()-p.HW())
		t.Partitions = append(t.Partitions, rp)
	}
	sort.Strings(names)
	for _, n := range names {
		t := byTopic[n]
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		dir.Topics = append(dir.Topics, *t)
	}
	if s.logDirErr() != nil { // offline (logdir.go): Kafka lists no partitions
		dir.ErrorCode, dir.Topics = kerr.KafkaStorageError.Code, nil
	}
	resp.Dirs = append(resp.Dirs, dir)
	if rd, ok := s.remoteLogDir(want); ok {
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp, nil
}

// remoteLogDir is the second log dir of a broker with tiered storage: the
// remote tier, named by its store's description (s3://bucket/prefix or
// file:///dir, never credentials), total and usable bytes -1 (unknown),
// with each tiered partition this broker leads and the size of its remote
// log (the .log bytes of its COPY_SEGMENT_FINISHED segments).
func (s *Server) remoteLogDir(want func(string, int32) bool) (kmsg.DescribeLogDirsResponseDir, bool) {
	dir := kmsg.NewDescribeLogDirsResponseDir()
	if s.tier == nil {
		return dir, false
	}
	dir.Dir = s.tier.store.String()
	dir.TotalBytes, dir.UsableBytes = -1, -1
	byTopic := map[string]*kmsg.DescribeLogDirsResponseDirTopic{}
	var names []string
	for _, p := range s.allPartitions() {
		if !want(p.Topic(), p.Index()) || !s.remoteReadable(p) || !s.isLeader(p) {
			continue
		}
		size, _, err := tier.RemoteLogSize(s.tier.idx, tierPartition(p))
		if err != nil {
			dir.ErrorCode = kerr.KafkaStorageError.Code
			continue
		}
		t := byTopic[p.Topic()]
		if t == nil {
			nt := kmsg.NewDescribeLogDirsResponseDirTopic()
			nt.Topic = p.Topic()
			t = &nt
			byTopic[p.Topic()] = t
			names = append(names, p.Topic())
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition = p.Index()
		rp.Size = size
		t.Partitions = append(t.Partitions, rp)
	}
	sort.Strings(names)
	for _, n := range names {
		t := byTopic[n]
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		dir.Topics = append(dir.Topics, *t)
	}
	return dir, true
}
