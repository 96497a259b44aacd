package group

// ConsumerGroupDescribe (API 69) for one consumer group.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe fills the description of the group.
func (g *ConsumerGroup) Describe(topics TopicLookup) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = g.id
	d.State = g.StateString()
	d.Epoch = g.epoch
	d.AssignmentEpoch = g.assignmentEpoch
	d.AssignorName = g.assignor
	if d.AssignorName == "" {
		d.AssignorName = g.preferredAssignor()
	}
	for _, id := range g.MemberIDs() {
		m := g.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.ID
		dm.InstanceID = m.InstanceID
		dm.RackID = m.RackID
		dm.MemberEpoch = m.Epoch
		dm.ClientID = m.ClientID
		dm.ClientHost = m.ClientHost
		dm.SubscribedTopics = slices.Clone(m.SubscribedTopicNames)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = m.SubscribedTopicRegex
		dm.Assignment = describeAssignment(m.Assigned, topics)
		dm.TargetAssignment = describeAssignment(g.target[id], topics)
		dm.MemberType = 1 // consumer protocol
		d.Members = append(d.Members, dm)
	}
	if d.Members == nil {
		d.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
	}
	return d
}

func describeAssignment(tp TopicPartitions, topics TopicLookup) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, id := range sortedTopicIDs(tp) {
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID = id
		if topics != nil {
			if ti, ok := topics.TopicByID(id); ok {
				t.Topic = ti.Name
			}
		}
		t.Partitions = slices.Clone(tp[id])
		a.TopicPartitions = append(a.TopicPartitions, t)
	}
	return a
}
