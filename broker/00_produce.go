package broker

// Produce, v3-12, advertised as v0-12.
//
// v3+ carries record batches of magic v2 only (Kafka 4 serves no older
// format). Like Kafka since KAFKA-18659, ApiVersions still lists v0, because
// librdkafka before 2.10 disables gzip, snappy and lz4 when it does not see
// it; requests below v3 are answered UNSUPPORTED_VERSION. acks 0, 1 and -1:
// acks=-1 checks the ISR against min.insync.replicas before appending, then
// waits until the high watermark passes the batch (replica.Manager.AwaitReplication);
// with one replica that is at once. NOT_LEADER_OR_FOLLOWER carries the
// current leader from v10 (KIP-951). Idempotent
// duplicates are answered with their original offsets (KIP-98). acks=0
// requests get no response; a failure closes the connection, as Kafka
// does, so the producer notices. A transactional
// batch whose producer has no open transaction in its partition is first
// verified with the transaction coordinator (KIP-890, txn_verify.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/plog"
	"strata/broker/replica"
	"strata/broker/txn"
	"strata/controller"
)

func init() { register(0, 0, 12, handleProduce) }

func handleProduce(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var failed bool
	setErr := func(p *kmsg.ProduceResponseTopicPartition, code int16, msg string) {
		p.ErrorCode = code
		if msg != "" && req.Version >= 8 {
			p.ErrorMessage = &msg
		}
		failed = true
	}
	badAcks := req.Acks != 0 && req.Acks != 1 && req.Acks != -1
	md := s.ctrl.Metadata()
	var waits []replica.ProduceWait
	// The partitions that passed the checks, appended after them.
	type pending struct {
		ti, pi  int
		topic   string
		part    int32
		records []byte
		txn     *txnAppend // a transactional Produce's transactional batch
	}
	var todo []pending
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		t := md.Topics[rt.Topic]
		allowed := s.authorizedTopic(cc, acl.OpWrite, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			switch {
			case req.Version < 3:
				setErr(&sp, kerr.UnsupportedVersion.Code, "produce requests below v3 are not supported")
			case badAcks:
				setErr(&sp, kerr.InvalidRequiredAcks.Code, "")
			case req.TransactionID != nil && !s.authorized(cc, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID):
				setErr(&sp, errTxnIDAuth, "")
			case !allowed:
				setErr(&sp, errTopicAuth, "")
			case !validTopicName(rt.Topic):
				setErr(&sp, kerr.InvalidTopicException.Code, "")
			case isInternalTopic(rt.Topic):
				setErr(&sp, kerr.InvalidTopicException.Code, "cannot append to internal topic "+rt.Topic)
			case t == nil:
				setErr(&sp, kerr.UnknownTopicOrPartition.Code, "")
			default:
				todo = append(todo, pending{ti: len(resp.Topics), pi: len(st.Partitions), topic: t.Name, part: rp.Partition, records: rp.Records})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	// Transactional writes with no open transaction in their partition
	// are verified with the coordinator first (txn_verify.go).
	// Unless the leader adds the partitions (transaction version 2,
	// whose epoch bumps fence a write of an ended transaction), each
	// transactional batch is appended against its verification guard (0
	// where the transaction was open already).
	var refused map[txn.TopicPartition]verifyRefusal
	// A draining broker refuses the writes (produceTo): none is verified,
	// which could add its partition to a transaction.
	if req.TransactionID != nil && !s.draining.Load() {
		guarded := !s.leaderAddsPartitions(req.Version)
		var writes []txnWrite
		for i := range todo {
			w := &todo[i]
			pid, epoch, ok := transactionalBatch(w.records)
			if !ok {
				continue
			}
			ta := &txnAppend{pid: pid, epoch: epoch}
			if guarded {
				w.txn = ta
			}
			p := s.partition(w.topic, w.part)
			if p == nil || !s.isLeader(p) || p.Log().HasOngoingTransaction(pid, epoch) {
				continue // produceTo answers the partition
			}
			if guarded {
				ta.guard = p.Log().StartTxnVerification(pid)
			}
			writes = append(writes, txnWrite{txn.TopicPartition{Topic: w.topic, Partition: w.part}, pid, epoch})
		}
		refused = s.verifyTxnWrites(req.Version, *req.TransactionID, writes, verifyDeadline(time.Now(), req.TimeoutMillis))
	}
	for _, w := range todo {
		sp := &resp.Topics[w.ti].Partitions[w.pi]
		if r, ok := refused[txn.TopicPartition{Topic: w.topic, Partition: w.part}]; ok {
			setErr(sp, r.code, r.msg)
			s.metrics.produceErrors.Inc()
			continue
		}
		if pw := s.produceTo(sp, w.topic, w.part, w.records, w.txn, req.Acks, setErr); pw.P != nil {
			pw.Topic, pw.Part = w.ti, w.pi
			waits = append(waits, pw)
		}
	}
	if len(waits) > 0 {
		// Answered once replicated, by the connection's writer: the
		// connection goes on reading (network/conn.go).
		deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
		return &delayedResponse{Response: resp, wait: func() {
			s.replicas.AwaitReplication(resp, waits, deadline, setErr)
			if req.Version >= 10 {
				s.addCurrentLeaders(cc, s.ctrl.Metadata(), resp)
			}
		}}, nil
	}
	if req.Version >= 10 {
		s.addCurrentLeaders(cc, s.ctrl.Metadata(), resp)
	}
	if req.Acks == 0 {
		if failed {
			return nil, fmt.Errorf("acks=0 produce failed")
		}
		return nil, nil
	}
	return resp, nil
}

// produceTo appends to one partition (a transactional batch of a
// transactional Produce, ta, against its verification guard:
// txn_verify.go); for acks=-1 it returns what to wait for (p nil when
// nothing is).
func (s *Server) produceTo(sp *kmsg.ProduceResponseTopicPartition, topic string, part int32, records []byte, ta *txnAppend, acks int16,
	setErr func(*kmsg.ProduceResponseTopicPartition, int16, string)) (w replica.ProduceWait) {
	p := s.partition(topic, part)
	if p == nil {
		setErr(sp, kerr.UnknownTopicOrPartition.Code, "")
		return
	}
	if s.offlineProduce(sp, p, setErr) { // logdir.go
		return
	}
	if !s.isLeader(p) {
		setErr(sp, kerr.NotLeaderForPartition.Code, "")
		return
	}
	if p.Restoring.Load() {
		setErr(sp, kerr.LeaderNotAvailable.Code, "the leader is taking the partition's log end from remote storage")
		return
	}
	if s.drainProduce(sp, setErr) { // drain.go
		return
	}
	if code, msg := checkProduceRecords(records); code != 0 {
		setErr(sp, code, msg)
		s.metrics.produceErrors.Inc()
		return
	}
	if acks == -1 {
		isr, minISR := p.ISRSize(), int(p.MinISR())
		if isr < minISR {
			setErr(sp, kerr.NotEnoughReplicas.Code, fmt.Sprintf("ISR has %d replicas, min.insync.replicas is %d", isr, minISR))
			return
		}
	}
	var info plog.AppendInfo
	var err error
	if ta != nil {
		info, err = p.AppendVerifiedAsLeader(records, ta.pid, ta.epoch, ta.guard)
	} else {
		info, err = p.AppendAsLeader(records)
	}
	if err != nil {
		code := errCode(err)
		if code == kerr.UnknownServerError.Code {
			s.log.Error("append", "topic", topic, "partition", part, "err", err)
		}
		setErr(sp, code, err.Error())
		var re *plog.RecordErrors
		if errors.As(err, &re) { // encoded from v8
			for _, r := range re.Records {
				e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				e.RelativeOffset, e.ErrorMessage = r.BatchIndex, kmsg.StringPtr(r.Message)
				sp.ErrorRecords = append(sp.ErrorRecords, e)
			}
		}
		s.metrics.produceErrors.Inc()
		return
	}
	sp.BaseOffset = info.FirstOffset
	sp.LogAppendTime = info.LogAppendTime
	sp.LogStartOffset = info.LogStartOffset
	if !info.Duplicate {
		s.metrics.bytesIn.Add(float64(len(records)))
		s.metrics.messagesIn.Add(float64(info.NumRecords))
	}
	p.AdvanceHW(p.Log().LogEndOffset()) // also wakes followers' fetches
	if acks == -1 {
		w.P, w.Required = p, info.LastOffset+1
	}
	return w
}

// checkProduceRecords applies Kafka's rules for a partition's records in
// Produce v3+ before the log sees them (ProduceRequest.validateRecords
// over ByteBufferLogInputStream): exactly one record batch, of magic v2.
// Records too short to hold a batch header, or a batch longer than the
// records, are "no batch" (INVALID_RECORD); a length below the smallest
// record's or an unknown magic is CORRUPT_MESSAGE. Unlike Kafka, which
// drops bytes after the batch that do not make a whole second batch,
// any bytes after the batch are refused. The batch itself (CRC, header,
// records) is the log's to check.
func checkProduceRecords(records []byte) (int16, string) {
	const (
		logOverhead       = 12 // baseOffset, batchLength
		headerUpToMagic   = 17
		minRecordOverhead = 14 // Kafka's LegacyRecord.RECORD_OVERHEAD_V0
	)
	noBatch := "produce requests must have at least one record batch per partition"
	if len(records) < logOverhead {
		return kerr.InvalidRecord.Code, fmt.Sprintf("%s: %d bytes of records", noBatch, len(records))
	}
	length := int64(int32(binary.BigEndian.Uint32(records[8:])))
	if length < minRecordOverhead {
		return kerr.CorruptMessage.Code, fmt.Sprintf("record size %d is less than the minimum record overhead (%d)", length, minRecordOverhead)
	}
	if len(records) < headerUpToMagic {
		return kerr.InvalidRecord.Code, fmt.Sprintf("%s: %d bytes of records", noBatch, len(records))
	}
	switch magic := int8(records[16]); {
	case magic < 0 || magic > 2:
		return kerr.CorruptMessage.Code, fmt.Sprintf("invalid magic found in record: %d", magic)
	case logOverhead+length > int64(len(records)):
		return kerr.InvalidRecord.Code, fmt.Sprintf("%s: a batch of %d bytes in %d bytes of records", noBatch, logOverhead+length, len(records))
	case magic != 2:
		return kerr.InvalidRecord.Code, fmt.Sprintf("produce requests are only allowed to contain record batches with magic version 2, not %d", magic)
	case logOverhead+length < int64(len(records)):
		return kerr.InvalidRecord.Code, "produce requests are only allowed to contain exactly one record batch per partition"
	}
	return 0, ""
}

// addCurrentLeaders fills KIP-951's CurrentLeader and NodeEndpoints for
// partitions answered NOT_LEADER_OR_FOLLOWER.
func (s *Server) addCurrentLeaders(cc *clientConn, md *controller.Metadata, resp *kmsg.ProduceResponse) {
	hint := map[int32]bool{}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		t := md.Topics[rt.Topic]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if rp.ErrorCode != kerr.NotLeaderForPartition.Code || t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				continue
			}
			pm := t.Partitions[rp.Partition]
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = pm.Leader, pm.LeaderEpoch
			if pm.Leader >= 0 {
				hint[pm.Leader] = true
			}
		}
	}
	for _, b := range md.Brokers {
		if host, port, ok := cc.endpoint(b); ok && hint[b.ID] {
			nb := kmsg.NewProduceResponseBroker()
			nb.NodeID, nb.Host, nb.Port, nb.Rack = b.ID, host, port, b.Rack
			resp.Brokers = append(resp.Brokers, nb)
		}
	}
}
