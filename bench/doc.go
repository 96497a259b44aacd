// Package bench is Strata's benchmark harness: a library driven by
// `strata bench` and usable from a testing.B.
//
// A [Config] describes one workload (record count and size, partitions,
// acks, compression, linger, producers, target rate) and the targets to run
// it against: Strata started as a separate process by the harness, franz-go's
// in-process kfake cluster, or any Kafka-protocol cluster at HOST:PORT.
// [Run] runs the workload against each target in turn and returns a
// [Report]; [RunSuite] runs several workloads and evaluates the issue's
// goals over them; [Suite.Write] writes report.json, report.md, benchstat
// lines (bench.txt) and PNG plots into a directory.
//
// Each target run has two phases:
//
//  1. Produce: Producers franz-go clients send Records records of RecordSize
//     bytes. With Rate > 0 the producers are open loop: record i has an
//     intended send time start+i/rate and its latency is measured from that
//     time to its acknowledgement, so a stalled broker shows up in the
//     latency rather than slowing the load (no coordinated omission). With
//     Rate == 0 the producers send as fast as the client buffers allow and
//     latency is measured from the Produce call.
//  2. Consume: a fresh client reads every partition from offset 0 until it
//     has every acknowledged record back; the records are recent, so a disk
//     broker serves them from the page cache.
//
// Latencies go into HDR histograms (1 µs to 60 s, 3 significant digits).
// For a Strata process the harness samples /proc/<pid>/status (VmRSS,
// VmHWM), /proc/<pid>/stat (CPU seconds) and /proc/<pid>/io (bytes written).
package bench
