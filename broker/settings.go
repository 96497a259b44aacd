package broker

import (
	"strconv"
	"time"

	"strata/broker/config"
	"strata/controller"
)

// Server-level settings come from the static config; topic settings are
// resolved per Kafka's layering (topic override, dynamic per-broker,
// dynamic cluster default, static, default) against the metadata.
// Leadership and ISR come from the controller's metadata.

func (s *Server) fetchMaxBytes() int32            { return s.cfg.FetchMaxBytes }
func (s *Server) autoCreateTopics() bool          { return s.cfg.AutoCreateTopicsEnable }
func (s *Server) deleteTopicEnable() bool         { return s.cfg.DeleteTopicEnable }
func (s *Server) defaultNumPartitions() int32     { return s.cfg.NumPartitions }
func (s *Server) defaultReplicationFactor() int16 { return s.cfg.DefaultReplicationFactor }

func (s *Server) retentionCheckInterval() time.Duration {
	d := time.Duration(s.cfg.LogRetentionCheckIntervalMs) * time.Millisecond
	if d <= 0 {
		d = 5 * time.Minute
	}
	return d
}

func (s *Server) flushCheckInterval() time.Duration {
	ms := s.cfg.LogFlushSchedulerIntervalMs
	if ms <= 0 || ms > 1000 {
		ms = 1000
	}
	return time.Duration(ms) * time.Millisecond
}

func (s *Server) resolver(md *controller.Metadata) config.Resolver {
	return s.cfg.Resolver(md.BrokerConfigs)
}

// validateTopicConfigs checks a CreateTopics config set and puts it in
// canonical form in place.
func (s *Server) validateTopicConfigs(m map[string]string) error {
	c, err := config.CanonicalTopicConfigs(m)
	if err != nil {
		return err
	}
	if err := s.resolver(s.ctrl.Metadata()).ValidateTopic(c); err != nil {
		return err
	}
	clear(m)
	for k, v := range c {
		m[k] = v
	}
	return nil
}

func (s *Server) describeTopicConfigs(md *controller.Metadata, t *controller.Topic, names []string, synonyms, docs bool) []kmsgConfig {
	return config.DescribeTopic(s.resolver(md), t.Configs, config.DescribeOptions{Names: names, IncludeSynonyms: synonyms, IncludeDocumentation: docs, Version: 4})
}

func (s *Server) brokerIDString() string { return strconv.Itoa(int(s.cfg.ID)) }

// partitionState is p's state in the current metadata, if the metadata
// holds p's topic (by id).
func (s *Server) partitionState(p *partition) (controller.Partition, bool) {
	return s.replicas.PartitionState(p)
}

// isLeader tells whether this broker leads p in the current metadata.
func (s *Server) isLeader(p *partition) bool { return s.replicas.IsLeader(p) }

// catchingUp reports whether this broker follows p from outside its ISR,
// as the metadata says.
func (s *Server) catchingUp(p *partition) bool { return s.replicas.CatchingUp(p) }

func (s *Server) isrSize(p *partition) int {
	t := s.ctrl.Metadata().Topics[p.Topic()]
	if t == nil || int(p.Index()) >= len(t.Partitions) {
		return 0
	}
	return len(t.Partitions[p.Index()].ISR)
}
