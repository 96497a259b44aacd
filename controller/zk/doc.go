// Package zk is the ZooKeeper-backed implementation of controller.Controller.
//
// Every broker runs one Controller. It registers the broker with an
// ephemeral znode and races the other brokers for the ephemeral /controller
// znode. The broker that holds /controller (with its current session) is
// the active controller: it reads the whole cluster from ZooKeeper through
// watches, and it alone creates, changes and deletes topics, elects
// partition leaders and handles controlled shutdown. Its writes are
// multi-ops that check the version of /controller_epoch it set when it
// took over, so a controller that has been replaced can no longer write
// (fencing).
//
// # Inter-broker requests
//
// As in Kafka's ZooKeeper mode, the other brokers do not read topics and
// partition states from ZooKeeper: the active controller sends them
// LeaderAndIsr (to the replicas of partitions whose leader or replicas
// changed), StopReplica with Delete (to brokers that no longer host a
// partition, or all of a deleted topic's replicas) and UpdateMetadata (the
// live brokers and every changed partition, to all), carrying its
// controller epoch and the receiver's broker epoch (send.go). Each is
// built from one consistent read: the replicas (topic znode) and the
// leader and ISR (state znodes) as ZooKeeper held them at one zxid, never
// from different moments (watch.go). One sender per broker sends the
// difference between what that broker acknowledged and the newest
// snapshot, so an unreachable broker is brought up to date in one step
// when it returns; the first requests of a controller epoch or to a new
// broker registration carry the whole cluster. Receivers refuse
// older controller epochs and any broker epoch but their own, believe a
// new controller epoch only once /controller and /controller_epoch confirm
// it, refuse illegal topic names, and never let an older partition state
// replace a newer one (push.go). Brokers still read configs, the cluster
// id and /controller from ZooKeeper, as Kafka's do, and a partition leader
// writes its own ISR changes to the state znode, conditionally on its
// version (Kafka's ZooKeeper mode before AlterPartition).
//
// Brokers in controlled shutdown (Kafka's shuttingDownBrokerIds) are left
// out of the live brokers until they register again: they are offered to
// no client, elected leader of nothing and let into no ISR, but still told
// of the moves away from them.
//
// # ZooKeeper layout
//
// Paths and JSON follow Kafka's ZooKeeper mode (kafka.zk.ZkData), so zkCli
// and operators' habits carry over. Paths are below the chroot of the
// connect string, if any.
//
//	/cluster/id                        {"version":"1","id":"<base64url uuid>"}
//	/brokers/ids/<id>         (eph.)   {"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
//	                                    "endpoints":["PLAINTEXT://host:port"],"rack":"r1",
//	                                    "jmx_port":-1,"host":"host","port":9092,
//	                                    "timestamp":"<ms>","version":5}
//	                                   the broker epoch is the znode's czxid
//	/controller               (eph.)   {"version":1,"brokerid":1,"timestamp":"<ms>"}
//	/controller_epoch                  the epoch as a decimal number, e.g. 7
//	/brokers/topics/<t>                {"version":3,"topic_id":"<base64url uuid>",
//	                                    "partitions":{"0":[1,2,3]},
//	                                    "adding_replicas":{},"removing_replicas":{}}
//	/brokers/topics/<t>/partitions/<p>/state
//	                                   {"controller_epoch":7,"leader":1,"version":1,
//	                                    "leader_epoch":0,"isr":[1,2,3]}
//	/config/topics/<t>                 {"version":1,"config":{"retention.ms":"1000"}}
//	/config/brokers/<id>|<default>     {"version":1,"config":{...}}
//	/config/changes/config_change_<n>  {"version":2,"entity_path":"topics/<t>"}
//	/admin/delete_topics/<t>           (empty) a deletion in progress
//	/latest_producer_id_block          {"version":1,"broker":1,"block_start":"0","block_end":"999"}
//	/kafka-acl/<Type>/<name>           {"version":1,"acls":[{"principal":"User:alice",
//	                                    "permissionType":"Allow","operation":"Read","host":"*"}]}
//	/kafka-acl-extended/prefixed/<Type>/<name>   the same, for PREFIXED patterns
//	/kafka-acl-changes/acl_changes_<n> "Topic:orders" (kafka_acls.go)
//	/kafka-acl-extended-changes/acl_changes_<n>
//	                                   {"version":1,"resourceType":"Group","name":"app-","patternType":"PREFIXED"}
//
// Version note: these are the versions Kafka 2.8–3.x writes in ZooKeeper
// mode; readers ignore fields they do not know, as Kafka does.
//
// # ACLs
//
// With zookeeper.set.acl (Options.Auth, acl.go) every znode is created
// with Kafka's ZkData.defaultAcls: the brokers' digest identity ALL and
// world READ, the sensitive paths (/config/users, /config/brokers,
// /delegation_token/tokens) the brokers' identity only. Every broker, at
// start, gives those ACLs to the existing znodes under Kafka's secure root
// paths and to the chroot (Kafka's zookeeper-security-migration). Without
// it znodes are open (world ALL), as before.
package zk
