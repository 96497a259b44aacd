package broker

// DescribeCluster, v0-1. v1's EndpointType: 1 = brokers; asking for
// controllers (2) is UNSUPPORTED_ENDPOINT_TYPE, as on a ZooKeeper-mode
// Kafka. The cluster's authorized operations (KIP-430) when asked: none
// without Describe on the cluster. As on Kafka's brokers (not its KRaft
// controllers), the request itself needs no ACL.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(60, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp, nil
	}
	md := s.ctrl.Metadata()
	resp.EndpointType = 1
	resp.ClusterID = md.ClusterID
	resp.ControllerID = md.ControllerID
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.clusterAuthorizedOperations(cc) // authz.go
	}
	for _, b := range md.Brokers {
		host, port, ok := cc.endpoint(b)
		if !ok {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.ID, host, port, b.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
