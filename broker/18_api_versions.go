package broker

// ApiVersions, v0-4.
//
// A request at a version above ours is answered at v0 with
// UNSUPPORTED_VERSION and our ApiVersions range (KIP-511), so that the
// client retries lower. v3+ is flexible, but the response header stays v0
// (no tagged fields) so that clients can always parse it.
//
// v3+ carries Kafka's transaction.version feature:
// supported 0-2, finalized at the broker's transaction.version setting
// (omitted when 0, as Kafka omits a feature at level 0). Clients use
// KIP-890 part 2 (EndTxn v5, Produce v12 without AddPartitionsToTxn) only
// when it is finalized at 2.

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
	resp.ApiKeys = apiVersionKeys()
	if req.Version >= 3 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, maxTransactionVersion
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		resp.FinalizedFeaturesEpoch = 0
		if tv := s.transactionVersion(); tv > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, tv, tv
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	return resp, nil
}

// Kafka's transaction.version feature (KIP-890 part 2 at level 2).
const (
	transactionVersionFeature = "transaction.version"
	maxTransactionVersion     = 2
)

// transactionVersion is the finalized transaction.version: the broker's
// setting.
func (s *Server) transactionVersion() int16 {
	return s.cfg.TransactionVersion
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
