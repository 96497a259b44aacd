package controller

import "maps"

// Edits of a Metadata copy that every in-process controller makes the same
// way. Topics are replaced, never changed in place, once published.

// removeTopic drops a topic and its id.
func (md *Metadata) removeTopic(t *Topic) {
	delete(md.Topics, t.Name)
	delete(md.TopicIDs, t.ID)
}

// setTopicConfigs replaces a topic's overrides with a copy of configs.
func (md *Metadata) setTopicConfigs(t *Topic, configs map[string]string) {
	nt := *t
	nt.Configs = maps.Clone(configs)
	if nt.Configs == nil {
		nt.Configs = map[string]string{}
	}
	md.Topics[t.Name] = &nt
}

// addPartitions replaces a topic by one with extra partitions appended.
func (md *Metadata) addPartitions(t *Topic, extra []Partition) {
	nt := *t
	nt.Partitions = append(append([]Partition(nil), t.Partitions...), extra...)
	md.Topics[t.Name] = &nt
}

// setBrokerConfigs replaces the dynamic overrides of broker ("" for the
// cluster default); an empty set removes them.
func (md *Metadata) setBrokerConfigs(broker string, configs map[string]string) {
	if len(configs) == 0 {
		delete(md.BrokerConfigs, broker)
		return
	}
	md.BrokerConfigs[broker] = maps.Clone(configs)
}
