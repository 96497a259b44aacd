package broker

import (
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// notYet are the Kafka APIs the README's "Not yet" list names, by key,
// with Kafka's names for them.
var notYet = map[int16]string{
	34: "AlterReplicaLogDirs",
	38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
	41: "DescribeDelegationToken", 55: "DescribeQuorum",
	57: "UpdateFeatures", 71: "GetTelemetrySubscriptions", 72: "PushTelemetry",
	74: "ListConfigResources", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat",
	77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter",
	81: "RemoveRaftVoter", 82: "UpdateRaftVoter", 88: "StreamsGroupHeartbeat",
	89: "StreamsGroupDescribe", 90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets",
	92: "DeleteShareGroupOffsets",
}

// internalOnly are APIs that only brokers and KRaft controllers send each
// other (or that only Kafka's own share-group and streams machinery uses):
// no client misses them, so the README does not list them.
var internalOnly = map[int16]bool{
	52: true, 53: true, 54: true, // Vote, BeginQuorumEpoch, EndQuorumEpoch
	56: true, 59: true, // AlterPartition, FetchSnapshot (Envelope, 58, is served)
	62: true, 63: true, 64: true, // BrokerRegistration, BrokerHeartbeat, UnregisterBroker
	67: true, 70: true, 73: true, // AllocateProducerIds, ControllerRegistration, AssignReplicasToDirs
	83: true, 84: true, 85: true, 86: true, 87: true, // share-group state
	93: true, 94: true, // StreamsGroupTopologyDescriptionUpdate, UnregisterController
}

// The README's "Not yet" list must stay true: every API it names is not
// served, and every client-facing API that is not served is named there.
func TestReadmeNotYetListMatchesServedAPIs(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "\n## Not yet\n")
	if start < 0 {
		t.Fatal(`README has no "## Not yet" section`)
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for key, name := range notYet {
		if _, served := apis[key]; served {
			t.Errorf("%s (key %d) is served now: take it out of the README's Not yet list and of notYet", name, key)
		}
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("the README's Not yet list does not name `%s` (key %d)", name, key)
		}
	}
	for key := int16(0); key < 200; key++ {
		if kmsg.RequestForKey(key) == nil {
			continue
		}
		_, served := apis[key]
		if _, listed := notYet[key]; !served && !listed && !internalOnly[key] {
			t.Errorf("API key %d (%s) is not served and neither the README's Not yet list nor internalOnly says so",
				key, kmsg.NameForKey(key))
		}
	}
}
