package broker

// Wiring of replication (package replica, Kafka's ReplicaManager and
// Partition) into the Server: the partitions this broker hosts live in
// s.replicas; the Server methods below keep the names the rest of the
// package calls.

import (
	"context"

	"strata/broker/plog"
	"strata/broker/replica"
	"strata/internal/vfs"
)

// partition is this broker's replica of one topic partition.
type partition = replica.Partition

// newReplicaManager makes the Server's replica manager.
func (s *Server) newReplicaManager() *replica.Manager {
	return replica.NewManager(replica.Options{
		Config:             s.cfg,
		Logger:             s.log,
		FS:                 s.fs,
		Controller:         func() replica.Controller { return s.ctrl },
		Context:            s.ctx,
		WG:                 &s.wg,
		Tiering:            replicaTiering{s},
		ReplicationBytesIn: func(n int) { s.metrics.replicationBytesIn.Add(float64(n)) },
		LogDirErr:          s.logDirErr,
		LogDirWriteFailed:  s.logDirWriteFailed,
		BrokerAddr:         s.brokerAddr, // listeners.go
		Dial:               s.dialBroker,
	})
}

func (s *Server) allPartitions() []*partition { return s.replicas.All() }

func (s *Server) partition(topic string, part int32) *partition {
	return s.replicas.Partition(topic, part)
}

// pauseReplication stops (true) or resumes (false) every fetcher of this
// broker (replica.Manager.PauseReplication).
func (s *Server) pauseReplication(paused bool) { s.replicas.PauseReplication(paused) }

// loadHWCheckpoint reads the high-watermark checkpoint before the first
// reconcile.
func (s *Server) loadHWCheckpoint() {
	s.registerLogDirMetrics() // logdir.go: once, as the log directory is first read
	s.replicas.LoadHWCheckpoint()
}

// checkpointHWs writes every hosted partition's high watermark, unless
// the log directory is offline.
func (s *Server) checkpointHWs() error { return s.replicas.CheckpointHWs() }

// writeLogDirFile replaces dir/name crash-safely (replica.WriteLogDirFile).
func writeLogDirFile(fsys vfs.FS, dir, name string, b []byte) error {
	return replica.WriteLogDirFile(fsys, dir, name, b)
}

// logDirFileDiskFull tells whether a failed writeLogDirFile is a full
// disk before any fsync.
func logDirFileDiskFull(err error) bool { return replica.LogDirFileDiskFull(err) }

// replicaTiering is tiered storage as the follower fetchers see it
// (replica.Tiering), through the Server's tier methods.
type replicaTiering struct{ s *Server }

func (t replicaTiering) Enabled() bool { return t.s.tier != nil }

func (t replicaTiering) SettingsKnown(p *partition) bool {
	_, known := t.s.tierSettings(p)
	return known
}

func (t replicaTiering) TieredLocal(p *partition) bool {
	_, tiered := t.s.tieredLocal(p)
	return tiered
}

func (t replicaTiering) RemoteReadable(p *partition) bool { return t.s.remoteReadable(p) }

func (t replicaTiering) RaiseRemoteLogStart(p *partition, offset int64) error {
	_, err := t.s.tier.idx.RaiseLogStartOffset(tierPartition(p), offset)
	return err
}

func (t replicaTiering) BuildAuxState(ctx context.Context, p *partition, offset int64) (plog.Reset, string, error) {
	r, m, err := t.s.rlm().BuildAuxState(ctx, tierPart{p}, offset)
	if err != nil {
		return plog.Reset{}, "", err
	}
	return r, m.SegmentID.String(), nil
}

func (t replicaTiering) BuildFailed() {
	if t.s.tier != nil {
		t.s.tier.BuildFailed()
	}
}
