package broker

// DescribeTransactions, v0 (the transaction coordinator: txns.go):
// the state of each transactional id this broker coordinates. Kafka's
// checks: Describe on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and only the topics the caller
// may Describe are listed among its partitions.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		if !s.authorized(cc, acl.OpDescribe, acl.ResourceTransactionalID, id) {
			st.ErrorCode = errTxnIDAuth
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		m, code := s.txns.coord.Describe(id)
		if st.ErrorCode = code; code == 0 {
			st.State = m.State.String()
			st.TimeoutMillis = m.TimeoutMs
			st.StartTimestamp = m.StartMs
			st.ProducerID, st.ProducerEpoch = m.ProducerID, m.ProducerEpoch
			allowed := map[string]bool{}
			for _, tp := range m.Partitions { // sorted by topic
				ok, seen := allowed[tp.Topic]
				if !seen {
					ok = s.authorizedTopic(cc, acl.OpDescribe, tp.Topic)
					allowed[tp.Topic] = ok
				}
				if !ok {
					continue
				}
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					st.Topics = append(st.Topics, t)
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
