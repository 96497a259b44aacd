// Package compat is the client matrix: a suite that drives a real Strata
// broker with the clients people use against Kafka (Apache Kafka's Java
// client and command-line tools, franz-go, IBM/sarama, segmentio/kafka-go,
// librdkafka through kcat and Debian's python3-confluent-kafka and through
// PyPI's confluent-kafka with the librdkafka its wheel bundles, and
// kafkajs) and records, for each client and feature, whether it works.
//
// Where each client comes from: the Go clients are modules of go.mod;
// deploy/install-deps.sh puts the others outside the work tree, Kafka's
// Java client from Maven Central (java/pom.xml), kafkajs from npm
// (node/package.json) and confluent-kafka from PyPI in a virtual
// environment (python/requirements.txt), each pinned to an exact
// version; kcat and python3-confluent-kafka are Debian's packages
// (`make test-deps`). scripts/rdkafka.py runs for both librdkafka
// columns, with Debian's python and with the virtual environment's.
//
// The test (compat_test.go) starts one broker for most checks, a
// two-broker cluster on ZooKeeper for the leader-change check and, for
// the security section (security_test.go), a broker with SSL, mutual TLS
// and SASL_SSL listeners (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER against a
// JWKS and a token endpoint the test serves) and ACLs that open each
// listener's topics to the principal it should give; it runs every
// client's checks, and compares the outcome with what this package
// declares:
//
//   - [clients] lists each client and the features it lacks (with why),
//     so that no feature is silently untested;
//   - [expectedFailures] lists the features that fail today because of the
//     broker, with the reason; a listed failure that starts passing fails
//     the test, so the list stays true.
//
// The transactions check (txn_test.go) is the same for every client that
// has transactions: the harness makes its topics beforehand and, after a
// pass, checks with franz-go what the client cannot see for itself (the
// aborted records are in the log, the group's offset is the one sent).
//
// It renders docs/compatibility.md from the outcome: `make compat` (which
// sets STRATA_COMPAT_WRITE=1) rewrites it, and `go test ./compat/` (so
// `make test`) fails when the file differs from what the run found.
//
// External clients run as subprocesses that print one line per check,
// "RESULT client|feature|PASS|FAIL|detail" (see
// java/src/main/java/strata/compat/Main.java, scripts/); for the leader
// change a client prints "MOVE topic" and waits for a line on its stdin,
// which the harness writes once it has moved that partition's leader.
// They find the security broker's listeners and credentials in the
// STRATA_COMPAT_SEC_* environment variables (secEnv.environ).
package compat
