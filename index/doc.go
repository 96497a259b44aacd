// Package index will hold the Badger index of remote segments: (topic id,
// partition, base offset) → remote segment metadata, rebuildable from the
// bucket. Nothing is here yet; see the tiered-storage issue.
package index
