package config

import "strconv"

// Kafka's compression.type values (BrokerCompressionType).
var compressionTypes = []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}

const (
	maxLong   = "9223372036854775807"
	maxInt    = "2147483647"
	week      = "604800000"
	msPerMin  = 60 * 1000
	msPerHour = 60 * msPerMin
)

// synonym is a broker config standing for a topic config; mult converts its
// unit to the topic config's (hours and minutes to milliseconds).
type synonym struct {
	name string
	mult int64
}

// topicSynonyms is Kafka's ServerTopicConfigSynonyms: for each topic config,
// its broker configs in priority order. Topic configs absent here have no
// broker-level default (only Kafka's).
var topicSynonyms = map[string][]synonym{
	"segment.bytes":                   {{"log.segment.bytes", 1}},
	"segment.ms":                      {{"log.roll.ms", 1}, {"log.roll.hours", msPerHour}},
	"segment.jitter.ms":               {{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", msPerHour}},
	"segment.index.bytes":             {{"log.index.size.max.bytes", 1}},
	"flush.messages":                  {{"log.flush.interval.messages", 1}},
	"flush.ms":                        {{"log.flush.interval.ms", 1}, {"log.flush.scheduler.interval.ms", 1}},
	"retention.bytes":                 {{"log.retention.bytes", 1}},
	"retention.ms":                    {{"log.retention.ms", 1}, {"log.retention.minutes", msPerMin}, {"log.retention.hours", msPerHour}},
	"max.message.bytes":               {{"message.max.bytes", 1}},
	"index.interval.bytes":            {{"log.index.interval.bytes", 1}},
	"delete.retention.ms":             {{"log.cleaner.delete.retention.ms", 1}},
	"min.compaction.lag.ms":           {{"log.cleaner.min.compaction.lag.ms", 1}},
	"max.compaction.lag.ms":           {{"log.cleaner.max.compaction.lag.ms", 1}},
	"file.delete.delay.ms":            {{"log.segment.delete.delay.ms", 1}},
	"min.cleanable.dirty.ratio":       {{"log.cleaner.min.cleanable.ratio", 1}},
	"cleanup.policy":                  {{"log.cleanup.policy", 1}},
	"unclean.leader.election.enable":  {{"unclean.leader.election.enable", 1}},
	"min.insync.replicas":             {{"min.insync.replicas", 1}},
	"compression.type":                {{"compression.type", 1}},
	"compression.gzip.level":          {{"compression.gzip.level", 1}},
	"compression.lz4.level":           {{"compression.lz4.level", 1}},
	"compression.zstd.level":          {{"compression.zstd.level", 1}},
	"preallocate":                     {{"log.preallocate", 1}},
	"message.timestamp.type":          {{"log.message.timestamp.type", 1}},
	"message.timestamp.before.max.ms": {{"log.message.timestamp.before.max.ms", 1}},
	"message.timestamp.after.max.ms":  {{"log.message.timestamp.after.max.ms", 1}},
	"local.retention.ms":              {{"log.local.retention.ms", 1}},
	"local.retention.bytes":           {{"log.local.retention.bytes", 1}},
	"message.downconversion.enable":   {{"log.message.downconversion.enable", 1}},
}

// brokerSynonymGroups is Kafka's DynamicBrokerConfig.brokerConfigSynonyms:
// broker configs that are one setting in different units, in priority
// order.
var brokerSynonymGroups = [][]string{
	{"log.roll.ms", "log.roll.hours"},
	{"log.roll.jitter.ms", "log.roll.jitter.hours"},
	{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"},
	{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
}

// brokerSynonyms returns the synonyms of a broker config, itself included,
// in priority order. log.flush.scheduler.interval.ms stands alone when
// asked for by name, as in Kafka.
func brokerSynonyms(name string) []string {
	for _, g := range brokerSynonymGroups {
		if name == "log.flush.scheduler.interval.ms" {
			break
		}
		for _, n := range g {
			if n == name {
				return g
			}
		}
	}
	return []string{name}
}

var topicTable = newTable([]*Def{
	{Name: "cleanup.policy", Type: List, Default: str("delete"), Check: listOf("compact", "delete"),
		Doc: `The retention policy for old log segments: "delete" (by retention time or size), "compact" (log compaction), or both.`},
	{Name: "compression.gzip.level", Type: Int, Default: str("-1"), Check: gzipLevel,
		Doc: "The compression level to use if compression.type is set to gzip."},
	{Name: "compression.lz4.level", Type: Int, Default: str("9"), Check: between(1, 17),
		Doc: "The compression level to use if compression.type is set to lz4."},
	{Name: "compression.type", Type: String, Default: str("producer"), Check: oneOf(compressionTypes...),
		Doc: "The final compression type for a topic: uncompressed, zstd, lz4, snappy, gzip, or producer to keep the producer's codec."},
	{Name: "compression.zstd.level", Type: Int, Default: str("3"), Check: between(-131072, 22),
		Doc: "The compression level to use if compression.type is set to zstd."},
	{Name: "delete.retention.ms", Type: Long, Default: str("86400000"), Check: atLeast(0),
		Doc: "The time to retain delete tombstone markers for log compacted topics."},
	{Name: "file.delete.delay.ms", Type: Long, Default: str("60000"), Check: atLeast(0),
		Doc: "The time to wait before deleting a file from the filesystem."},
	{Name: "flush.messages", Type: Long, Default: str(maxLong), Check: atLeast(1),
		Doc: "Force an fsync of the log after this many messages (the default leaves flushing to the operating system)."},
	{Name: "flush.ms", Type: Long, Default: str(maxLong), Check: atLeast(0),
		Doc: "Force an fsync of the log when the oldest unflushed message is this old, in milliseconds."},
	{Name: "follower.replication.throttled.replicas", Type: List, Default: str(""), Check: throttledReplicas,
		Doc: "Replicas whose log replication is throttled on the follower side (at follower.replication.throttled.rate): partition:broker pairs or *."},
	{Name: "index.interval.bytes", Type: Int, Default: str("4096"), Check: atLeast(0),
		Doc: "How often an entry is added to the offset index, in bytes of log."},
	{Name: "leader.replication.throttled.replicas", Type: List, Default: str(""), Check: throttledReplicas,
		Doc: "Replicas whose log replication is throttled on the leader side (at leader.replication.throttled.rate): partition:broker pairs or *."},
	{Name: "local.retention.bytes", Type: Long, Default: str("-2"), Check: atLeast(-2),
		Doc: "The maximum size of local log segments of a partition before they are deleted (tiered topics); -2 uses retention.bytes."},
	{Name: "local.retention.ms", Type: Long, Default: str("-2"), Check: atLeast(-2),
		Doc: "The time to keep local log segments before they are deleted (tiered topics); -2 uses retention.ms."},
	{Name: "max.compaction.lag.ms", Type: Long, Default: str(maxLong), Check: atLeast(1),
		Doc: "The maximum time a message remains ineligible for compaction."},
	{Name: "max.message.bytes", Type: Int, Default: str("1048588"), Check: atLeast(0),
		Doc: "The largest record batch size allowed, after compression."},
	{Name: "message.downconversion.enable", Type: Boolean, Default: str("true"),
		Doc: "Whether down-conversion of message formats is enabled for consume requests. Accepted, not used."},
	{Name: "message.timestamp.after.max.ms", Type: Long, Default: str("3600000"), Check: atLeast(0),
		Doc: "How far a CreateTime timestamp may be ahead of the broker's clock, in milliseconds."},
	{Name: "message.timestamp.before.max.ms", Type: Long, Default: str(maxLong), Check: atLeast(0),
		Doc: "How far a CreateTime timestamp may be behind the broker's clock, in milliseconds."},
	{Name: "message.timestamp.type", Type: String, Default: str("CreateTime"), Check: oneOf("CreateTime", "LogAppendTime"),
		Doc: "Whether the timestamp in the message is the create time or the log append time: CreateTime or LogAppendTime."},
	{Name: "min.cleanable.dirty.ratio", Type: Double, Default: str("0.5"), Check: between(0, 1),
		Doc: "How dirty a compacted log must be before it is cleaned."},
	{Name: "min.compaction.lag.ms", Type: Long, Default: str("0"), Check: atLeast(0),
		Doc: "The minimum time a message remains uncompacted in the log."},
	{Name: "min.insync.replicas", Type: Int, Default: str("1"), Check: atLeast(1),
		Doc: "With acks=all, the minimum number of in-sync replicas that must acknowledge a write, or the write fails with NOT_ENOUGH_REPLICAS."},
	{Name: "preallocate", Type: Boolean, Default: str("false"),
		Doc: "Whether to preallocate the file on disk when creating a new log segment. Accepted, not used."},
	{Name: "remote.log.copy.disable", Type: Boolean, Default: str("false"),
		Doc: "Whether tiered data of the topic is read only: no more segments are uploaded, and expiry follows retention.ms/bytes."},
	{Name: "remote.log.delete.on.disable", Type: Boolean, Default: str("false"),
		Doc: "Whether tiered data of the topic is deleted when remote.storage.enable is turned off."},
	{Name: "remote.storage.enable", Type: Boolean, Default: str("false"),
		Doc: "Whether sealed segments of the topic are moved to object storage (tiered storage)."},
	{Name: "retention.bytes", Type: Long, Default: str("-1"),
		Doc: "The maximum size of a partition before old segments are deleted; -1 means no size limit."},
	{Name: "retention.ms", Type: Long, Default: str(week), Check: atLeast(-1),
		Doc: "The maximum time to keep a log segment before deleting it; -1 means no time limit."},
	{Name: "segment.bytes", Type: Int, Default: str("1073741824"), Check: atLeast(14),
		Doc: "The segment file size of the log."},
	{Name: "segment.index.bytes", Type: Int, Default: str("10485760"), Check: atLeast(4),
		Doc: "The maximum size of the offset and time indexes of a segment."},
	{Name: "segment.jitter.ms", Type: Long, Default: str("0"), Check: atLeast(0),
		Doc: "The maximum random jitter subtracted from the scheduled segment roll time."},
	{Name: "segment.ms", Type: Long, Default: str(week), Check: atLeast(1),
		Doc: "The time after which the log is rolled even if the segment is not full."},
	{Name: "unclean.leader.election.enable", Type: Boolean, Default: str("false"),
		Doc: "Whether replicas not in the ISR may be elected leader as a last resort, at the risk of data loss."},
})

// gzipLevel is Kafka's GZIP level validator: -1 (default) or 1 to 9.
func gzipLevel(v any) error {
	if n := v.(int64); n != -1 && (n < 1 || n > 9) {
		return errorf("must be -1 or between 1 and 9, got " + strconv.FormatInt(n, 10))
	}
	return nil
}

type errorf string

func (e errorf) Error() string { return string(e) }
