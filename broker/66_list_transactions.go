package broker

// ListTransactions, v0-2 (the transaction coordinator: txns.go): the
// transactional ids this broker coordinates, filtered by state, producer
// id, age (v1, KIP-994: started more than DurationFilterMillis ago; -1
// any) and transactional id (v2, KIP-1152: a regular expression the whole
// id must match; empty or null: any). Unknown state names are listed back
// in UnknownStateFilters; a bad pattern is INVALID_REGULAR_EXPRESSION;
// while a __transaction_state partition is loading the answer is
// COORDINATOR_LOAD_IN_PROGRESS. Only ids the caller may Describe are
// listed (Kafka's check).

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

func init() { register(66, 0, 2, handleListTransactions) }

func handleListTransactions(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters, DurationMs: -1}
	if req.Version >= 1 {
		f.DurationMs = req.DurationFilterMillis
	}
	unknown := false
	for _, name := range req.StateFilters {
		st, ok := txn.StateByName(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			unknown = true
			continue
		}
		f.States = append(f.States, st)
	}
	if unknown && len(f.States) == 0 {
		// Only unknown states asked for: none matches (Kafka).
		return resp, nil
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
		pattern = re
	}
	out, loading := s.txns.coord.List(f)
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil
	}
	for _, m := range out {
		if pattern != nil && !pattern.MatchString(m.TransactionalID) {
			continue
		}
		if !s.authorized(cc, acl.OpDescribe, acl.ResourceTransactionalID, m.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = m.TransactionalID, m.ProducerID, m.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
