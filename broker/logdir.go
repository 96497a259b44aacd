package broker

// Log directory failure, as Kafka handles it (LogDirFailureChannel,
// ReplicaManager.handleLogDirFailure).
//
// When a partition log fails (plog: a failed fsync, or another I/O error
// that is not a full disk) the log directory goes offline, because the
// disk under it can no longer be trusted:
//
//   - every log in it is failed (plog.Log.Fail): none fsyncs, appends,
//     reads or moves its recovery point again until the broker restarts;
//   - its partitions answer KAFKA_STORAGE_ERROR to Produce, Fetch (from
//     consumers and followers), ListOffsets and OffsetForLeaderEpoch, before
//     any leadership check, as Kafka does for an offline replica; clients
//     retry it after refreshing their metadata; DescribeLogDirs reports
//     the directory with that error and no partitions;
//   - the broker stops following (its replica fetchers pause) and asks
//     the controller to move its leadership away and take it out of every
//     ISR, with the controlled-shutdown move (07_controlled_shutdown.go):
//     the ZooKeeper controller then elects it leader of nothing and lets it
//     join no ISR until it registers again (restarts). Kafka's broker
//     instead writes /log_dir_event_notification and the controller marks
//     only that directory's replicas offline; with one directory both come
//     to the same. A partition with no other live ISR member stays led by
//     this broker, answering KAFKA_STORAGE_ERROR (Kafka would make it
//     offline, leader -1, unless unclean election is on);
//   - the broker keeps serving what needs no log: ApiVersions, Metadata,
//     DescribeCluster, configs, admin requests forwarded to the controller.
//
// Strata has one data directory per broker, so this is Kafka's case of
// all log directories offline, in which Kafka halts the broker. Strata
// keeps the process up instead (the controller has moved leadership
// already, and an operator sees the error in the logs and in
// DescribeLogDirs); restarting it, once the disk is fixed, recovers every
// log from its last good recovery point and registers the broker again.
//
// What takes the directory offline: any I/O error of a partition log
// (plog/failure.go: a failed fsync, write, truncation or segment read, a
// producer snapshot or checkpoint that cannot be written), and a file
// the broker writes in it that cannot be written (the high-watermark
// checkpoint, replica/hw_checkpoint.go; partition.metadata,
// writePartitionMetadata).
//
// A full disk is not a failure: the append is refused with a retriable
// KAFKA_STORAGE_ERROR (plog.ErrNoSpace) and succeeds again when space
// returns; a checkpoint that does not fit stays as it was until the next
// rewrite. Nor is a lack of file descriptors (EMFILE, ENFILE): a file
// that cannot be opened for it is handled as a full disk
// (plog.ErrNoDescriptors), a partition that cannot be opened is retried
// every second, and the broker keeps within a descriptor budget
// (fd_budget.go).
//
// Operators see an offline directory in the logs, in DescribeLogDirs, in
// /healthz (HealthHandler: 503 naming the directory) and in Kafka's
// LogManager gauges, kafka.log:type=LogManager,name=OfflineLogDirectoryCount
// and name=LogDirectoryOffline,logDirectory=DIR, with Prometheus names
// (registerLogDirMetrics).

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/internal/obs"
)

// logDirState is the state of the broker's log directory.
type logDirState struct {
	mu    sync.Mutex
	cause error // why it went offline; nil while online

	metricsOnce sync.Once
}

// OfflineLogDirs returns the broker's log directories that are offline,
// none while every one is online. Strata has one (log.dirs).
func (s *Server) OfflineLogDirs() []string {
	if s.logDirErr() == nil {
		return nil
	}
	return []string{s.cfg.DataDir}
}

// HealthHandler answers /healthz: 200 "ok" while every log directory is
// online; else 503 with one line naming the offline ones, so that a
// supervisor or load balancer stops sending clients to a broker whose
// partitions all answer KAFKA_STORAGE_ERROR (Kafka would have halted).
func (s *Server) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if off := s.OfflineLogDirs(); len(off) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "offline log directories: %s\n", strings.Join(off, ","))
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

var (
	mOfflineLogDirs = obs.Gauge("kafka_log_logmanager_offlinelogdirectorycount",
		"Log directories offline after an I/O error (Kafka's LogManager OfflineLogDirectoryCount).")
	mLogDirOffline = obs.Gauge("kafka_log_logmanager_logdirectoryoffline",
		"1 when the log directory is offline after an I/O error, else 0 (Kafka's LogManager LogDirectoryOffline).",
		"logdirectory")
	mLogDirFree = obs.Gauge("strata_log_dir_free_bytes",
		"Bytes available to the broker on the file system of the log directory (0 when it cannot be read).",
		"logdirectory")
	mLogDirTotal = obs.Gauge("strata_log_dir_size_bytes",
		"Size in bytes of the file system of the log directory (0 when it cannot be read).",
		"logdirectory")
)

// diskSpace returns the bytes available to unprivileged users and the
// size of the file system holding dir; zeros when it cannot be read.
func diskSpace(dir string) (free, total int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize)
}

// registerLogDirMetrics registers Kafka's LogManager gauges of the log
// directory, once: OfflineLogDirectoryCount, and LogDirectoryOffline (1
// when offline) with the directory as label.
func (s *Server) registerLogDirMetrics() {
	s.ldir.metricsOnce.Do(func() {
		offline := func() float64 { return float64(len(s.OfflineLogDirs())) }
		s.Registry().MustRegister(
			mOfflineLogDirs.NewGaugeFunc(offline, nil),
			mLogDirOffline.NewGaugeFunc(offline, prometheus.Labels{"logdirectory": s.cfg.DataDir}),
			mLogDirFree.NewGaugeFunc(func() float64 { f, _ := diskSpace(s.cfg.DataDir); return float64(f) },
				prometheus.Labels{"logdirectory": s.cfg.DataDir}),
			mLogDirTotal.NewGaugeFunc(func() float64 { _, t := diskSpace(s.cfg.DataDir); return float64(t) },
				prometheus.Labels{"logdirectory": s.cfg.DataDir}),
		)
	})
}

// logDirWriteFailed takes the log directory offline after a failed write
// of a file the broker keeps in it (writeLogDirFile), unless the disk
// was merely full before any fsync; it tells whether it did.
func (s *Server) logDirWriteFailed(err error) bool {
	if err == nil || logDirFileDiskFull(err) {
		return false
	}
	s.logDirFailed(err)
	return true
}

// writePartitionMetadata writes a partition directory's partition.metadata
// (Kafka's PartitionMetadataFile) crash-safely through the broker's
// filesystem. An I/O error takes the log directory offline, as Kafka's
// does, and is returned wrapping KAFKA_STORAGE_ERROR; on a full disk only
// the error is returned.
func (s *Server) writePartitionMetadata(dir string, b []byte) error {
	err := writeLogDirFile(s.fs, dir, partitionMetadataFile, b)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%w: write %s: %w", kerr.KafkaStorageError, partitionMetadataFile, err)
	s.logDirWriteFailed(err)
	return err
}

// logDirErr returns why the log directory is offline, or nil.
func (s *Server) logDirErr() error {
	s.ldir.mu.Lock()
	defer s.ldir.mu.Unlock()
	return s.ldir.cause
}

// watchLog makes a failure of l take the log directory offline; a log
// opened in an offline directory fails at once.
func (s *Server) watchLog(l *plog.Log) {
	l.OnFailure(s.logDirFailed)
	if cause := s.logDirErr(); cause != nil {
		l.Fail(fmt.Errorf("log directory offline: %w", cause))
	}
}

// offline tells whether p's log can no longer be used: its directory is
// offline, or the log itself failed (the directory follows at once).
func (s *Server) offline(p *partition) bool {
	return s.logDirErr() != nil || p.Log().Err() != nil
}

// offlineProduce answers a produce to an offline partition with
// KAFKA_STORAGE_ERROR; false if p is online.
func (s *Server) offlineProduce(sp *kmsg.ProduceResponseTopicPartition, p *partition,
	setErr func(*kmsg.ProduceResponseTopicPartition, int16, string)) bool {
	if !s.offline(p) {
		return false
	}
	setErr(sp, kerr.KafkaStorageError.Code, "the log directory of this replica is offline")
	return true
}

// logDirFailed takes the log directory offline (once), with cause.
func (s *Server) logDirFailed(cause error) {
	s.ldir.mu.Lock()
	if s.ldir.cause != nil {
		s.ldir.mu.Unlock()
		return
	}
	s.ldir.cause = cause
	s.ldir.mu.Unlock()
	s.log.Error("log directory offline: its partitions answer KAFKA_STORAGE_ERROR until the broker restarts",
		"dir", s.cfg.DataDir, "err", cause)
	failed := fmt.Errorf("log directory offline: %w", cause)
	for _, p := range s.allPartitions() {
		p.Log().Fail(failed)
	}
	go s.leaveAfterLogDirFailure()
}

// leaveAfterLogDirFailure stops following and moves leadership away, with
// the controlled-shutdown move, retrying as controlled shutdown does.
func (s *Server) leaveAfterLogDirFailure() {
	s.pauseReplication(true)
	if md := s.ctrl.Metadata(); len(md.Brokers) < 2 {
		s.log.Warn("log directory offline on the only broker: its partitions stay offline until it restarts")
		return
	}
	backoff := time.Duration(s.cfg.ControlledShutdownRetryBackoffMs) * time.Millisecond
	for attempt := int32(0); s.ctx.Err() == nil; attempt++ {
		remaining, err := s.askControlledShutdown()
		if err == nil && remaining == 0 {
			s.log.Info("leadership moved away from the offline log directory")
			return
		}
		if attempt >= s.cfg.ControlledShutdownMaxRetries {
			s.log.Warn("leadership could not move away from the offline log directory: no other live ISR member",
				"remaining_partitions", remaining, "err", err)
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}
