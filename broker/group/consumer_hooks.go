package group

// Plugging consumer groups into the Coordinator's registry.

// ConsumerGroupHooks returns the registry hooks that create consumer
// groups. topics returns the current topic metadata; coord returns the
// Coordinator once it exists (the hooks are made before it), so that a
// group's timers can take its partition lock.
func ConsumerGroupHooks(cfg ConsumerGroupConfig, topics func() TopicLookup, coord func() *Coordinator) ModernHooks {
	return ModernHooks{
		NewGroup: func(groupID string) ModernGroup {
			var g *ConsumerGroup
			g = NewConsumerGroupWithEnv(groupID, cfg, ConsumerGroupEnv{
				Topics: topics,
				Fire: func(id string) {
					c := coord()
					if c == nil {
						return
					}
					c.LockedModern(id, g, func(mg ModernGroup) []Record {
						cg, ok := mg.(*ConsumerGroup)
						if !ok {
							return nil
						}
						return cg.ExpireNow()
					})
				},
			})
			return g
		},
		RecordGroupID: ConsumerRecordGroupID,
	}
}

var _ ModernGroup = (*ConsumerGroup)(nil)
