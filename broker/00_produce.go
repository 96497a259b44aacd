package broker

// Produce, v3-12, advertised as v0-12.
//
// v3+ carries record batches of magic v2 only (Kafka 4 serves no older
// format). Like Kafka since KAFKA-18659, ApiVersions still lists v0, because
// librdkafka before 2.10 disables gzip, snappy and lz4 when it does not see
// it; requests below v3 are answered UNSUPPORTED_VERSION. acks 0, 1 and -1:
// acks=-1 checks the ISR against min.insync.replicas before appending, then
// waits until the high watermark passes the batch (replica_produce.go);
// with one replica that is at once. NOT_LEADER_OR_FOLLOWER carries the
// current leader from v10 (KIP-951). Idempotent
// duplicates are answered with their original offsets (KIP-98). acks=0
// requests get no response; a failure closes the connection, as Kafka
// does, so the producer notices.

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	var waits []produceWait
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		t := md.Topics[rt.Topic]
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			switch {
			case req.Version < 3:
				setErr(&sp, kerr.UnsupportedVersion.Code, "produce requests below v3 are not supported")
			case badAcks:
				setErr(&sp, kerr.InvalidRequiredAcks.Code, "")
			case req.TransactionID != nil:
				setErr(&sp, kerr.TransactionalIDAuthorizationFailed.Code, "transactions are not supported yet")
			case !validTopicName(rt.Topic):
				setErr(&sp, kerr.InvalidTopicException.Code, "")
			case isInternalTopic(rt.Topic):
				setErr(&sp, kerr.InvalidTopicException.Code, "cannot append to internal topic "+rt.Topic)
			case t == nil:
				setErr(&sp, kerr.UnknownTopicOrPartition.Code, "")
			default:
				if w := s.produceTo(&sp, t.Name, rp.Partition, rp.Records, req.Acks, setErr); w.p != nil {
					w.topic, w.part = len(resp.Topics), len(st.Partitions)
					waits = append(waits, w)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) > 0 {
		// Answered once replicated, by the connection's writer: the
		// connection goes on reading (conn.go).
		deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
		return &delayedResponse{Response: resp, wait: func() {
			s.awaitReplication(resp, waits, deadline, setErr)
			if req.Version >= 10 {
				s.addCurrentLeaders(s.ctrl.Metadata(), resp)
			}
		}}, nil
	}
	if req.Version >= 10 {
		s.addCurrentLeaders(s.ctrl.Metadata(), resp)
	}
	if req.Acks == 0 {
		if failed {
			return nil, fmt.Errorf("acks=0 produce failed")
		}
		return nil, nil
	}
	return resp, nil
}

// produceTo appends to one partition; for acks=-1 it returns what to wait
// for (p nil when nothing is).
func (s *Server) produceTo(sp *kmsg.ProduceResponseTopicPartition, topic string, part int32, records []byte, acks int16,
	setErr func(*kmsg.ProduceResponseTopicPartition, int16, string)) (w produceWait) {
	p := s.partition(topic, part)
	if p == nil {
		setErr(sp, kerr.UnknownTopicOrPartition.Code, "")
		return
	}
	if !s.isLeader(p) {
		setErr(sp, kerr.NotLeaderForPartition.Code, "")
		return
	}
	// v3+ carries exactly one batch per partition (Kafka's rule).
	// (A short or truncated batch is the log's to refuse as corrupt.)
	if n := int64(int32(binary.BigEndian.Uint32(records[8:min(12, len(records))]))); len(records) >= 12 && n >= 0 && n+12 < int64(len(records)) {
		setErr(sp, kerr.InvalidRecord.Code, "a produce request must carry exactly one record batch per partition")
		return
	}
	if acks == -1 {
		isr, minISR := p.isrSize(), int(p.minISR.Load())
		if isr < minISR {
			setErr(sp, kerr.NotEnoughReplicas.Code, fmt.Sprintf("ISR has %d replicas, min.insync.replicas is %d", isr, minISR))
			return
		}
	}
	info, err := p.log.Append(records, p.leaderEpoch.Load())
	if err != nil {
		code := errCode(err)
		if code == kerr.UnknownServerError.Code {
			s.log.Error("append", "topic", topic, "partition", part, "err", err)
		}
		setErr(sp, code, err.Error())
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
	p.advanceHW(p.log.LogEndOffset()) // also wakes followers' fetches
	if acks == -1 {
		w.p, w.required = p, info.LastOffset+1
	}
	return w
}
