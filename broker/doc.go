// Package broker is the Kafka protocol and its dispatch: one file per API
// key, named by key (00_produce.go … 69_consumer_group_describe.go), each
// thin: decode, check, call the room that owns the state, encode. The
// Server (server.go) wires the rooms together and applies the
// controller's metadata to them (reconcile).
//
// The rooms, each a package of its own:
//
//   - broker/network, Kafka's SocketServer: accept, framing, connection
//     limits, the request memory pool, deadlines, muting, writev and
//     sendfile. dispatch.go is the broker's Handler for it.
//   - broker/replica, Kafka's ReplicaManager, Partition and follower
//     fetchers: the hosted partitions, high watermark, leader and follower
//     roles, ISR changes, the high-watermark checkpoint, throttles, fetch
//     from follower. replicas.go wires it.
//   - broker/remotelog, Kafka's RemoteLogManager: uploads and their
//     fencing, remote reads, remote retention, lifecycle, restore, a new
//     follower's warm-up. remotelog_glue.go wires it.
//   - broker/group, the group coordinator; groups.go hosts it on the
//     __consumer_offsets partitions this broker leads.
//   - broker/acl, Kafka's AclAuthorizer: the ACL model and its decisions,
//     over the ACLs the controller stores. authz.go and authz_groups.go
//     hold the check each handler makes (the operation Kafka's KafkaApis
//     checks), acls_common.go what CreateAcls, DescribeAcls and
//     DeleteAcls share.
//   - broker/plog, the partition log; broker/config, the configuration
//     with Kafka's names.
//
// The broker may import every room, strata/controller, strata/tier and
// strata/index. No room imports the broker, and the rooms' own rules are
// in their doc.go; internal/archtest reads the import graph and fails on
// a broken rule.
package broker
