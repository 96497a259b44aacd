package txn

// PRODUCER_FENCED exists since KIP-588; older versions of the
// transactional APIs are answered INVALID_PRODUCER_EPOCH instead, which
// their clients handle the same way (Kafka's KafkaApis does this).

import "github.com/twmb/franz-go/pkg/kerr"

// firstFencedVersion is, per API key, the first version whose clients
// know PRODUCER_FENCED.
var firstFencedVersion = map[int16]int16{
	22: 4, // InitProducerId
	24: 2, // AddPartitionsToTxn
	25: 2, // AddOffsetsToTxn
	26: 2, // EndTxn
	28: 3, // TxnOffsetCommit
}

// CodeForVersion is the code to answer for code at a request's API key
// and version: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for
// versions before KIP-588.
func CodeForVersion(apiKey, version, code int16) int16 {
	if first, ok := firstFencedVersion[apiKey]; ok && code == codeProducerFenced && version < first {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
