package broker

// ControlledShutdown, v0-3 (API key 7).
//
// Served by the active controller: in a cluster only v2+ with the asking
// broker's exact epoch (v0 and v1 carry none, so anyone could take any
// broker out of every ISR with them; STALE_BROKER_EPOCH), from a
// connection interBrokerAllowed admits (interbroker.go). It moves
// leadership away from the broker that asks (see controller.ShutdownMove) and answers with the
// partitions that broker still leads. The asking side, run by Close, sends
// the request to the active controller and retries
// controlled.shutdown.max.retries times, controlled.shutdown.retry.backoff.ms
// apart, while partitions remain; then it shuts down anyway.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/replica"
	"strata/controller"
)

func init() { register(7, 0, 3, handleControlledShutdown) }

func handleControlledShutdown(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ControlledShutdownRequest)
	resp := req.ResponseKind().(*kmsg.ControlledShutdownResponse)
	epoch := req.BrokerEpoch
	if req.Version < 2 {
		epoch = -1 // no broker epoch before v2
	}
	_, cluster := s.inCluster()
	_, embedded := s.ctrl.(*controller.Embedded)
	switch {
	case !s.interBrokerAllowed(cc):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	case cluster && epoch < 0, embedded: // a single node has no broker epochs and no other broker
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp, nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	remaining, err := s.ctrl.ControlledShutdown(ctx, req.BrokerID, epoch)
	switch {
	case errors.Is(err, controller.ErrNotController):
		resp.ErrorCode = kerr.NotController.Code
	case errors.Is(err, controller.ErrStaleBrokerEpoch):
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
	case err != nil:
		s.log.Warn("controlled shutdown failed", "broker", req.BrokerID, "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
	}
	for _, tp := range remaining {
		rp := kmsg.NewControlledShutdownResponsePartitionsRemaining()
		rp.Topic, rp.Partition = tp.Topic, tp.Partition
		resp.PartitionsRemaining = append(resp.PartitionsRemaining, rp)
	}
	return resp, nil
}

// brokerEpocher is a controller that knows brokers' epochs (ZooKeeper).
type brokerEpocher interface{ BrokerEpoch(id int32) int64 }

// controlledShutdown asks the active controller to move this broker's
// leadership away before it closes, retrying as configured. It returns
// once nothing remains or the retries are spent; the broker shuts down in
// either case.
func (s *Server) controlledShutdown() {
	if s.ctrl == nil || !s.cfg.ControlledShutdownEnable {
		return
	}
	if _, ok := s.ctrl.(brokerEpocher); !ok {
		// Only a cluster controller (ZooKeeper) has other brokers to move
		// leadership to; the in-memory test controller is told directly.
		return
	}
	if md := s.ctrl.Metadata(); len(md.Brokers) < 2 {
		return // a single broker: nowhere to move leadership
	}
	// Stop following first, so that no leader takes this broker back into
	// an ISR while its leadership moves away (Kafka's controller stops a
	// shutting-down broker's followers with StopReplica for the same end).
	s.pauseReplication(true)
	backoff := time.Duration(s.cfg.ControlledShutdownRetryBackoffMs) * time.Millisecond
	start := time.Now()
	for attempt := int32(0); ; attempt++ {
		remaining, err := s.askControlledShutdown()
		if err == nil && remaining == 0 {
			s.awaitNoLeadership(5 * time.Second)
			s.lingerForClients(100*time.Millisecond, time.Second)
			s.log.Info("controlled shutdown succeeded", "took", time.Since(start))
			return
		}
		if attempt >= s.cfg.ControlledShutdownMaxRetries {
			s.log.Warn("controlled shutdown incomplete; shutting down anyway", "remaining_partitions", remaining, "err", err)
			return
		}
		s.log.Info("controlled shutdown to retry", "remaining_partitions", remaining, "err", err, "backoff", backoff)
		time.Sleep(backoff)
	}
}

// askControlledShutdown sends one ControlledShutdown to the active
// controller (or serves it locally when this broker is the controller) and
// returns how many partitions this broker still leads.
func (s *Server) askControlledShutdown() (int, error) {
	md := s.ctrl.Metadata()
	epoch := int64(-1)
	if be, ok := s.ctrl.(brokerEpocher); ok {
		epoch = be.BrokerEpoch(s.cfg.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if md.ControllerID == s.cfg.ID {
		remaining, err := s.ctrl.ControlledShutdown(ctx, s.cfg.ID, epoch)
		return len(remaining), err
	}
	var addr string
	if b, ok := md.Broker(md.ControllerID); ok {
		addr = s.brokerAddr(b)
	}
	if addr == "" {
		return -1, fmt.Errorf("controller %d is not known", md.ControllerID)
	}
	c, err := s.dialBroker(ctx, "tcp", addr)
	if err != nil {
		return -1, fmt.Errorf("dial controller %d at %s: %w", md.ControllerID, addr, err)
	}
	rc := replica.NewConn(c, "strata-broker-"+strconv.Itoa(int(s.cfg.ID)))
	defer rc.Close()
	req := kmsg.NewPtrControlledShutdownRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = s.cfg.ID, epoch
	kresp, err := rc.RoundTrip(req, 30*time.Second)
	if err != nil {
		return -1, fmt.Errorf("controlled shutdown via controller %d: %w", md.ControllerID, err)
	}
	resp := kresp.(*kmsg.ControlledShutdownResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("controlled shutdown via controller %d: %w", md.ControllerID, err)
	}
	return len(resp.PartitionsRemaining), nil
}

// lingerForClients serves on, once this broker leads nothing, until no
// request has arrived for quiet (at most max): a producer whose next
// request comes in that time is answered NOT_LEADER_OR_FOLLOWER with the
// new leader (KIP-951) and moves at once, where a connection closed under
// it has a client such as franz-go wait for its next metadata refresh
// (up to its metadata min age, 5 s) before it finds the new leader.
func (s *Server) lingerForClients(quiet, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && s.network.QuietFor() < quiet {
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitNoLeadership waits (at most d) until this broker has applied the
// metadata in which it leads nothing, so that produce requests waiting on
// it are answered NOT_LEADER_OR_FOLLOWER before connections close.
func (s *Server) awaitNoLeadership(d time.Duration) {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		// Led per the metadata, or not yet made a follower by reconcile:
		// that is what answers the produces waiting on the partition
		// NOT_LEADER_OR_FOLLOWER with the new leader (KIP-951), which
		// must reach the producers before the connections close, or they
		// see the connection drop and wait for their next metadata
		// refresh instead.
		leads := s.replicas.AwaitingReplication() > 0
		for _, p := range s.allPartitions() {
			if _, _, role := p.LeaderTerm(); role || s.isLeader(p) {
				leads = true
				break
			}
		}
		if !leads {
			return
		}
		<-tick.C
	}
}
