package broker

// Who may send a broker the requests only brokers send: the controller's
// LeaderAndIsr, UpdateMetadata and StopReplica (04_leader_and_isr.go,
// 05_stop_replica.go, 06_update_metadata.go), ControlledShutdown
// (07_controlled_shutdown.go) and a replica's Fetch (01_fetch.go).
//
// Two checks, in this order:
//
//  1. interBrokerAllowed: may this connection send them at all? As
//     Kafka, the authorizer (authz.go; none: allowed) must grant the
//     connection's principal ClusterAction on the cluster (the brokers'
//     principal is a super user), and they are refused on any listener
//     but the inter-broker and control-plane ones
//     (inter.broker.listener.name, control.plane.listener.name), which
//     matters when they are apart from the clients' listener.
//  2. The request's own fencing, which holds with security off: the
//     controller's requests carry the receiving broker's exact epoch and
//     a controller epoch ZooKeeper confirms (controller/zk/push.go);
//     ControlledShutdown needs v2+ and the broker's exact epoch
//     (controller/zk/shutdown.go); a replica's Fetch needs v15+ with the
//     follower's broker epoch (KIP-903's ReplicaEpoch), from a replica of
//     the partition (checkReplicaFetch). A broker on the embedded
//     controller has no other broker, and refuses all of them.
//
// Strata's own configs (strata.*) are changed only where
// mayAlterClusterConfigs says so: Alter on the cluster
// (33_alter_configs.go, 44_incremental_alter_configs.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/controller"
)

// interBrokerAllowed reports whether the connection may send controller
// and replica requests (Kafka: ClusterAction on the cluster, on the
// inter-broker listener): with ClusterAction, and only on the
// inter-broker or control-plane listener. A connection made by hand in
// tests has no listener. Within it, the requests' own epochs fence them.
func (s *Server) interBrokerAllowed(cc *clientConn) bool {
	if !s.authorizedCluster(cc, acl.OpClusterAction) {
		return false
	}
	l := cc.listener()
	if l == "" {
		return true
	}
	ib, _ := s.cfg.InterBroker()
	cp, _ := s.cfg.ControlPlane()
	return l == ib || cp != "" && l == cp
}

// mayAlterClusterConfigs reports whether the connection may change
// Strata's own broker configs (strata.*): Alter on the cluster, on top of
// the AlterConfigs on the cluster that any broker config needs
// (configsRefusal). Without an authorizer every connection may, within
// the configs' ranges (config.CheckStrataConfigs); the caller is
// alterResource (alter_configs_common.go).
func (s *Server) mayAlterClusterConfigs(cc *clientConn) bool {
	return s.authorizedCluster(cc, acl.OpAlter)
}

// inCluster reports whether this broker has other brokers: a controller
// that knows brokers' epochs (ZooKeeper).
func (s *Server) inCluster() (brokerEpocher, bool) {
	be, ok := s.ctrl.(brokerEpocher)
	return be, ok
}

// checkReplicaFetch decides, before anything is read or recorded, whether
// a Fetch with a replica id may act as that replica for each partition
// named; a refused target gets its error code in refuse. As Kafka's
// Partition.followerReplicaOrThrow: a replica id that is not a replica of
// the partition (or is this broker) gets UNKNOWN_LEADER_EPOCH when the
// fetch names a leader epoch, NOT_LEADER_OR_FOLLOWER when not. Then, in a
// cluster, the fetch must carry the follower's broker epoch (v15+,
// ReplicaState.ReplicaEpoch, KIP-903) equal to the one this broker knows
// from ZooKeeper: a fetch without it, or with another, is refused with
// STALE_BROKER_EPOCH, so that no one but the follower itself moves the
// high watermark or keeps it in the ISR.
func (s *Server) checkReplicaFetch(cc *clientConn, req *kmsg.FetchRequest, replicaID int32, md *controller.Metadata, targets []*fetchTarget) {
	allowed := s.interBrokerAllowed(cc)
	be, cluster := s.inCluster()
	staleEpoch := cluster && (req.Version < 15 || req.ReplicaState.Epoch < 0 || req.ReplicaState.Epoch != be.BrokerEpoch(replicaID))
	for _, t := range targets {
		var pm controller.Partition
		if topic := md.Topics[t.key.topic]; topic != nil && t.key.part >= 0 && int(t.key.part) < len(topic.Partitions) {
			pm = topic.Partitions[t.key.part]
		}
		switch {
		case !allowed:
			t.refuse = kerr.TopicAuthorizationFailed.Code // Kafka's answer to a replica fetch without ClusterAction
		case replicaID == s.cfg.ID || !containsID(pm.Replicas, replicaID):
			t.refuse = kerr.NotLeaderForPartition.Code
			if t.leaderEpoch >= 0 {
				t.refuse = kerr.UnknownLeaderEpoch.Code
			}
		case staleEpoch:
			t.refuse = kerr.StaleBrokerEpoch.Code
		default:
			t.refuse = 0
		}
	}
}
