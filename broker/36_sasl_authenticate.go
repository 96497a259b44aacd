package broker

// SaslAuthenticate, v0-2: see 17_sasl_handshake.go.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(36, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate on a listener without SASL"
	resp.ErrorMessage = &msg
	return resp, nil
}
