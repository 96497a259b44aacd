package broker

// ApiVersions, v0-4.
//
// A request at a version above ours is answered at v0 with
// UNSUPPORTED_VERSION and our ApiVersions range (KIP-511), so that the
// client retries lower. v3+ is flexible, but the response header stays v0
// (no tagged fields) so that clients can always parse it.

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(18, 0, 4, handleApiVersions) }

var softwareRe = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareRe.MatchString(req.ClientSoftwareName) || !softwareRe.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	resp.ApiKeys = apiVersionKeys(s.txns != nil)
	return resp, nil
}

// unsupportedApiVersions answers an ApiVersions request whose version we do
// not know (KIP-511).
func unsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	e := apis[18]
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = 18, e.min, e.max
	resp.ApiKeys = append(resp.ApiKeys, k)
	return resp
}
