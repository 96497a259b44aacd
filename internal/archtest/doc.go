// Package archtest holds no code of the broker: its test reads the
// module's import graph (go list) and fails when a package reaches a
// room it must not. The rules are the ones each package's doc.go states:
//
//   - the log (broker/plog) imports nothing of the broker;
//   - the network layer (broker/network) imports no handler, no
//     replication, no tier orchestration and no controller;
//   - replication (broker/replica) imports no handler, network layer,
//     tier orchestration, object store or index;
//   - tier orchestration (broker/remotelog) imports no handler and no
//     network layer;
//   - the transaction coordinator (broker/txn), like the group
//     coordinator, imports nothing of the broker but its configuration;
//   - tier/ and index/ import nothing of the broker but the log;
//   - no package but cmd/ imports bench/ or the ZooKeeper controller
//     (save the generator of docs/metrics.md, internal/obs/metricsdoc,
//     which imports the packages that declare metrics), and none
//     imports the test harness (internal/testenv, internal/e2e).
//
// Rules apply to the transitive imports of non-test code, so a room
// cannot reach a forbidden one through a third package.
package archtest
