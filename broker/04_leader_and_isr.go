package broker

// LeaderAndIsr v5-7 (API key 4), with StopReplica (05_stop_replica.go) and
// UpdateMetadata (06_update_metadata.go): the requests the active controller sends
// to every other broker in ZooKeeper mode (controller/zk's push.go and
// send.go), with topic ids (KIP-516) and flexible versions. Only a
// connection interBrokerAllowed admits may send them (interbroker.go;
// CLUSTER_AUTHORIZATION_FAILED otherwise). The controller checks the
// receiving broker's exact epoch, a controller epoch ZooKeeper confirms,
// and the topic names (controller/zk/push.go), and keeps what it is told;
// for LeaderAndIsr and StopReplica the broker then takes up its new roles
// before it answers, as Kafka's ReplicaManager does. A broker on the
// embedded controller has no other controller and refuses them from
// anyone with STALE_CONTROLLER_EPOCH.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(4, 5, 7, handleLeaderAndISR) }

// controllerReceiver is a controller that takes the active controller's
// inter-broker requests (the ZooKeeper controller).
type controllerReceiver interface {
	HandleLeaderAndISR(context.Context, *kmsg.LeaderAndISRRequest) *kmsg.LeaderAndISRResponse
	HandleStopReplica(context.Context, *kmsg.StopReplicaRequest) *kmsg.StopReplicaResponse
	HandleUpdateMetadata(context.Context, *kmsg.UpdateMetadataRequest) *kmsg.UpdateMetadataResponse
}

func (s *Server) receiver() controllerReceiver {
	r, _ := s.ctrl.(controllerReceiver)
	return r
}

// applyNow reconciles with the newest metadata, so that the answer to the
// controller means the broker acts on it.
func (s *Server) applyNow() {
	if err := s.reconcile(s.ctrl.Metadata()); err != nil {
		s.log.Error("apply metadata", "err", err)
	}
}

func interBrokerContext(s *Server) (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, 10*time.Second)
}

func handleLeaderAndISR(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaderAndISRRequest)
	r := s.receiver()
	if r == nil || !s.interBrokerAllowed(cc) { // interbroker.go
		resp := req.ResponseKind().(*kmsg.LeaderAndISRResponse)
		resp.ErrorCode = kerr.StaleControllerEpoch.Code
		if r != nil {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	ctx, cancel := interBrokerContext(s)
	defer cancel()
	resp := r.HandleLeaderAndISR(ctx, req)
	resp.SetVersion(req.Version)
	if resp.ErrorCode == 0 {
		s.applyNow()
	}
	return resp, nil
}
