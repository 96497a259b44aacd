// Package remotelog is the broker's tiered storage orchestration, Kafka's
// RemoteLogManager: the upload scheduling of the sealed segments of the
// partitions a broker leads, and its fencing by leader epoch; the remote
// index's refresh from the bucket (a partition's first refresh, warming,
// and every pass's); remote reads for Fetch and ListOffsets, and the
// aborted transactions of read_committed fetches over the remote and
// local logs (txn.go); a new follower's log start from the bucket (the bucket's part of Kafka's
// buildRemoteLogAuxState); the restore of a leader whose log is empty;
// remote retention, deletion on remote.storage.enable=false and the
// remote data of deleted topics; bucket lifecycle rules and
// reconciliation; and the KIP-405 metrics of all this. manager.go has
// the overview.
//
// The broker holds one Manager, opened by Open (none when tiered storage
// is off), and reaches it through thin wrappers. Partitions are the
// broker's: the manager sees them through the Partition interface, and
// the broker through the Broker interface, both declared here and
// implemented by the broker.
//
// Imports: strata/tier (the object store and manifests), strata/index
// (the remote segment index), strata/broker/plog, strata/broker/config,
// strata/controller, strata/internal/*, franz-go and the standard
// library. strata/broker/replica is allowed too, but partitions are
// reached through the interfaces here, which keeps the manager's view of
// a partition small. It must not import strata/broker (the handlers),
// strata/broker/network or strata/broker/group; internal/archtest checks
// this. Code of the object store and its manifests belongs in
// strata/tier, and of the index in strata/index, not here.
package remotelog
