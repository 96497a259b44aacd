package broker

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame encodes a request as a client would.
func frame(req kmsg.Request, version int16, corr int32) []byte {
	req.SetVersion(version)
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "fuzz"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// FuzzRequestFrame feeds arbitrary bytes to a connection of a live broker:
// whatever arrives, the broker answers or closes the connection, and never
// panics or hangs.
func FuzzRequestFrame(f *testing.F) {
	md := kmsg.NewPtrMetadataRequest()
	f.Add(frame(md, 12, 1))
	f.Add(frame(kmsg.NewPtrApiVersionsRequest(), 3, 2))
	ct := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = "fuzz", 1, 1
	ct.Topics = append(ct.Topics, t)
	f.Add(frame(ct, 7, 3))
	fr := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "fuzz"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	f.Add(frame(fr, 11, 4))
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks = 1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "fuzz"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 70)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	f.Add(frame(pr, 9, 5))
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = "g", 6000, 6000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{0, 1, 0, 0, 0, 1, 0, 4, 'f', 'u', 'z', 'z', 0, 0, 0, 0}
	jg.Protocols = append(jg.Protocols, jp)
	f.Add(frame(jg, 9, 6))
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.MemberID, sg.Generation = "g", "m", 1
	f.Add(frame(sg, 5, 7))
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g", -1
	f.Add(frame(oc, 9, 8))
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", 0, 5000
	hb.SubscribedTopicNames = []string{"fuzz"}
	f.Add(frame(hb, 0, 9))
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	f.Add(frame(fc, 4, 10))
	f.Add([]byte{0, 0, 0, 8, 0, 99, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})

	s := startTestServer(f, map[string]string{"socket.request.max.bytes": "1048576", "offsets.topic.num.partitions": "1",
		"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "10"})
	s.maxFetchWait = 50 * time.Millisecond
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() { s.network.ServeConn(server); close(done) }()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write(data)
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection did not finish")
		}
	})
}
