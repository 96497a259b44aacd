package remotelog

// Hooks for the broker's tests, which run a whole broker and reach into
// its tiered storage between two passes.

// PausePasses holds the tier passes (a running pass finishes first) until
// ResumePasses.
func (rm *Manager) PausePasses() { rm.passMu.Lock() }

// ResumePasses lets the tier passes run again after PausePasses.
func (rm *Manager) ResumePasses() { rm.passMu.Unlock() }

// IndexFresh reports whether p's index was refreshed from the bucket
// since this broker opened p.
func (rm *Manager) IndexFresh(p Partition) bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return rm.fresh[p]
}

// SetIndexFresh marks p's index refreshed from the bucket, or not, as if
// just opened.
func (rm *Manager) SetIndexFresh(p Partition, fresh bool) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if fresh {
		rm.fresh[p] = true
	} else {
		delete(rm.fresh, p)
	}
}

// ForgetIndex empties p's remote index and forgets that it was refreshed
// in its leader epoch, as a new leader that does not know its
// predecessor's uploads.
func (rm *Manager) ForgetIndex(p Partition) error {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	err := rm.idx.ReplacePartition(tierPartition(p), nil)
	delete(rm.follow.refreshed, p)
	return err
}

// TopicDeletionUnderWay reports whether a partition of topic id vanished
// from the metadata while the topic is still there (ForgetRemoteTopic).
func (rm *Manager) TopicDeletionUnderWay(id [16]byte) bool {
	r := rm.retention
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.deleting[id]
	return ok
}

// DeleteRemoteTopics runs the deletion of the remote data of the topics
// marked deleted, as a tier pass does first.
func (rm *Manager) DeleteRemoteTopics() { rm.deleteRemoteTopics() }

// ForgetRestore forgets that p's restore concluded, as if this broker
// had become its leader without MarkRestore (CheckRestore's case).
func (rm *Manager) ForgetRestore(p Partition) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	delete(rm.restored, p)
}
