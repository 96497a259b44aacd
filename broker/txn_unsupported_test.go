package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Regression: a transactional producer waited for its own timeout, because
// FindCoordinator for a transaction key answered COORDINATOR_NOT_AVAILABLE,
// which clients retry. Until transactions exist it must fail at once.
func TestTransactionalProducerFailsFast(t *testing.T) {
	ts := startTestServer(t, nil)
	ctx := testCtx(t)
	ts.admin(t).CreateTopic(ctx, 1, 1, nil, "txn")

	cl := ts.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("txn"),
		kgo.TransactionTimeout(10*time.Second), kgo.RecordRetries(100))
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := cl.BeginTransaction()
	if err == nil {
		err = cl.ProduceSync(pctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("transactional produce: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("transactional produce failed after %v; want at once", took)
	}

	// The refusal names the reason, for clients that show messages (the
	// Java client does).
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorKey, req.CoordinatorType = "tx-1", 1
	resp, err := req.RequestWith(ctx, ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != errTransactionsUnsupported {
		t.Fatalf("FindCoordinator(transaction): %+v", resp)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	ip.TransactionalID = kmsg.StringPtr("tx-1")
	ip.TransactionTimeoutMillis = 10000
	// Straight to the broker: the client would look for a coordinator first.
	kr, err := ts.client(t).SeedBrokers()[0].Request(ctx, ip)
	if err != nil {
		t.Fatal(err)
	}
	if ipr := kr.(*kmsg.InitProducerIDResponse); ipr.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || ipr.ProducerID != -1 {
		t.Fatalf("InitProducerId(transactional): %+v", ipr)
	}
}
