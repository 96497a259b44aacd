// Package config is the broker's configuration, with Kafka's names.
//
// It has four parts:
//
//   - the definitions (defs.go, defs_broker.go, defs_topic.go): every broker
//     and topic config Strata knows, with Kafka's type, default, validator,
//     documentation and, for broker configs, whether it may be changed
//     dynamically (AlterConfigs on a BROKER resource);
//   - parsing of server.properties files and --set key=value items
//     (properties.go), of STRATA_ environment variables in the apache/kafka
//     image's convention (env.go), and the typed Broker struct built from
//     them (broker.go);
//   - resolution (resolve.go, topic.go): the effective value of a broker
//     config given the static config and the dynamic overrides kept by the
//     controller, and of a topic config given the topic's overrides, with
//     Kafka's precedence (topic override, dynamic per-broker, dynamic
//     cluster-wide default, static server.properties, Kafka's default) and
//     Kafka's synonym rules (log.retention.ms > .minutes > .hours, log.roll.ms >
//     log.roll.hours, log.flush.interval.ms > log.flush.scheduler.interval.ms);
//   - the DescribeConfigs, AlterConfigs and IncrementalAlterConfigs logic
//     (describe.go, alter.go) built on kmsg types; the handlers only route.
//
// Unknown keys are refused, unlike Kafka which only warns: a typo in
// server.properties or --set stops the broker with a one-line reason. Keys a
// stock Kafka server.properties carries that Strata has no use for (socket
// buffer sizes, KRaft quorum settings, listener.security.protocol.map, …) are
// accepted and ignored (see ignoredKeys). TLS and SASL keys (ssl.*, sasl.*,
// and listener-prefixed ones) are refused, since Strata serves plaintext only
// and silently ignoring them would look like security that is not there.
//
// Deviations from Kafka, on purpose:
//   - broker.id defaults to 0 (no automatic id generation); node.id is
//     accepted as its synonym when broker.id is not set.
//   - log.dir defaults to ./strata-data, and Strata serves exactly one data
//     directory.
//   - segment.bytes / log.segment.bytes accept values down to 14 bytes, as
//     Kafka 3.x did (Kafka 4 requires 1 MiB), so tests can roll small
//     segments.
//   - listeners and advertised.listeners are read-only (Kafka allows them
//     per-broker dynamically).
//   - properties files are read as UTF-8 (Java reads ISO-8859-1).
//
// Errors returned to request handlers are *Error values wrapping a kerr
// sentinel (kerr.InvalidConfig or kerr.InvalidRequest) with a message fit for
// the response's ErrorMessage.
package config
