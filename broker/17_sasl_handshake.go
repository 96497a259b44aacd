package broker

// SaslHandshake, v0-1, and SaslAuthenticate (36_sasl_authenticate.go):
// on a SASL_PLAINTEXT or SASL_SSL listener the network layer serves them
// (broker/network/sasl.go) and they never reach here. On any other
// listener there is no SASL exchange to take part in, and Kafka answers
// ILLEGAL_SASL_STATE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(17, 0, 1, handleSaslHandshake) }

func handleSaslHandshake(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp, nil
}
