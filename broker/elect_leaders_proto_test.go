package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// On a single node the only replica always leads: every election is not
// needed, unknown partitions are named, and an unknown election type is an
// invalid request.
func TestElectLeadersSingleNode(t *testing.T) {
	ts := startTestServer(t, nil)
	ctx := testCtx(t)
	adm := ts.admin(t)
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, "el"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}, 1: {}}, "missing": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if r := res["el"][p]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("partition %d: %+v, want ELECTION_NOT_NEEDED", p, r)
		}
	}
	if r := res["missing"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("missing topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", r)
	}
	// A null topic list is every partition.
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.TimeoutMillis = 2, 5000
	resp, err := req.RequestWith(ctx, ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "el" || len(resp.Topics[0].Partitions) != 2 {
		t.Errorf("all partitions: got %+v", resp.Topics)
	}
	req.ElectionType = 7
	if resp, err = req.RequestWith(ctx, ts.client(t)); err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("election type 7: %+v %v, want INVALID_REQUEST", resp, err)
	}
}
