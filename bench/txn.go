package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactional producers (Workload.TxnRecords): each producer client has
// a transactional.id of its own and sends its records in transactions of
// TxnRecords records: BeginTransaction, the records (Produce, as the
// idempotent producer sends them), then Flush and EndTransaction with
// TryCommit. The last transaction of a run may be shorter. A record is
// acknowledged when its transaction has committed: the throughput counts
// committed records up to the last commit, and a record's produce latency
// runs from its intended send time to the commit's answer. The consumers
// read with isolation.level=read_committed, so that their end-to-end
// latency includes the commit and the markers that make the records
// visible.
//
// The checks of a run count the commit markers: each committed
// transaction writes one control record per partition it touched, so the
// partitions' end offsets add up to the committed records plus those
// markers, and the consumers, which never see a marker, read every
// committed record once.

// txnState is the open transaction of one producer client.
type txnState struct {
	open bool
	sent int // records handed to the client in the open transaction

	mu      sync.Mutex
	pending []txnRec // records of the open transaction the broker has acknowledged
}

// txnRec is a record acknowledged by Produce in an open transaction.
type txnRec struct {
	tp       tp
	offset   int64
	bytes    int
	intended time.Time
	measured bool
}

func (t *txnState) add(r txnRec) {
	t.mu.Lock()
	t.pending = append(t.pending, r)
	t.mu.Unlock()
}

// txnCounts are the transactions of one target run.
type txnCounts struct {
	mu       sync.Mutex
	commits  int64
	markers  int64        // control records: one per partition of each committed transaction
	ackedEnd map[tp]int64 // per partition, the offset after its last committed record
}

// transactionalID names producer idx of topic.
func transactionalID(topic string, idx int) string {
	return fmt.Sprintf("strata-bench-%s-%d", topic, idx)
}

// txnOpts are the producer options of a transactional client.
func txnOpts(topic string, idx int) []kgo.Opt {
	return []kgo.Opt{kgo.TransactionalID(transactionalID(topic, idx)), kgo.TransactionTimeout(time.Minute)}
}

// txnSend hands one record to p's client in a transaction, beginning one
// if none is open, and commits when the transaction is full. It returns
// false when the producer must stop (a failed transaction, recorded).
func (ps *producers) txnSend(ctx context.Context, p *producer, intended time.Time, measured bool) bool {
	if !p.txn.open {
		if err := p.cl.BeginTransaction(); err != nil {
			ps.fail(fmt.Errorf("begin transaction: %w", err), 0)
			return false
		}
		p.txn.open = true
	}
	ps.send(ctx, p, intended, measured)
	p.txn.sent++
	if p.txn.sent >= ps.cfg.TxnRecords {
		return ps.commit(ctx, p)
	}
	return true
}

// commit flushes p's open transaction and commits it; once committed, its
// records count as acknowledged, each with its latency to now. A failed
// commit counts every record of the transaction as an error.
func (ps *producers) commit(ctx context.Context, p *producer) bool {
	t := p.txn
	if !t.open {
		return true
	}
	sent := t.sent
	t.open, t.sent = false, 0
	err := p.cl.Flush(ctx)
	if err == nil {
		err = p.cl.EndTransaction(ctx, kgo.TryCommit)
	}
	now := time.Now()
	t.mu.Lock()
	recs := t.pending
	t.pending = nil
	t.mu.Unlock()
	if err != nil {
		// The records whose Produce failed are counted already.
		ps.fail(fmt.Errorf("commit a transaction of %d records: %w", sent, err), int64(len(recs)))
		return false
	}
	if len(recs) != sent {
		ps.fail(fmt.Errorf("a transaction of %d records committed with %d acknowledged", sent, len(recs)), int64(sent))
		return false
	}
	parts := map[tp]int64{}
	var mrecs, mbytes int64
	for _, r := range recs {
		ps.all.records.Add(1)
		ps.all.bytes.Add(int64(r.bytes))
		parts[r.tp] = max(parts[r.tp], r.offset+1)
		if r.measured {
			ps.hist.record(now.Sub(r.intended))
			mrecs++
			mbytes += int64(r.bytes)
		}
	}
	tc := ps.txns
	tc.mu.Lock()
	tc.commits++
	tc.markers += int64(len(parts))
	for k, end := range parts {
		tc.ackedEnd[k] = max(tc.ackedEnd[k], end)
	}
	tc.mu.Unlock()
	if mrecs > 0 {
		ps.measured.records.Add(mrecs)
		ps.measured.bytes.Add(mbytes)
		ps.noteAck(now)
	}
	return true
}

// fail records err as the producers' first error, with n more failed
// records.
func (ps *producers) fail(err error, n int64) {
	ps.all.errors.Add(n)
	ps.errMu.Lock()
	if ps.firstErr == nil {
		ps.firstErr = err
	}
	ps.errMu.Unlock()
}

// ackedEnd is, per partition, the offset after the last committed record:
// what read_committed consumers read up to (the end offset is past the
// last marker).
func (ps *producers) ackedEnd() map[tp]int64 {
	ps.txns.mu.Lock()
	defer ps.txns.mu.Unlock()
	out := make(map[tp]int64, len(ps.txns.ackedEnd))
	for k, v := range ps.txns.ackedEnd {
		out[k] = v
	}
	return out
}
