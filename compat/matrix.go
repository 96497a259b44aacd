package compat

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Feature is one row of the matrix.
type Feature struct {
	Key, Title string
}

// features are the rows, in the order of the document.
var features = []Feature{
	{"produce-gzip", "produce, gzip"},
	{"produce-snappy", "produce, snappy"},
	{"produce-lz4", "produce, lz4"},
	{"produce-zstd", "produce, zstd"},
	{"produce-idempotent", "idempotent produce"},
	{"consume-partition", "consume assigned partitions"},
	{"group-default", "group, default assignor"},
	{"group-cooperative", "group, cooperative assignor"},
	{"group-kip848", "group, KIP-848 consumer protocol"},
	{"offsets", "commit and fetch offsets"},
	{"admin", "admin: create/delete topics, describe configs"},
	{"leader-change", "metadata after a leader change"},
	{"transactions", "transactions"},
}

// secFeatures are the rows of the security table: each is a produce and
// a read back through one listener of the security broker (see
// security_test.go), run by the clients with Sec set.
var secFeatures = []Feature{
	{"sec-tls", "SSL: TLS, the broker's certificate checked"},
	{"sec-mtls", "SSL: mutual TLS, principal from `ssl.principal.mapping.rules`"},
	{"sec-plain", "SASL_SSL: PLAIN"},
	{"sec-scram-sha-256", "SASL_SSL: SCRAM-SHA-256"},
	{"sec-scram-sha-512", "SASL_SSL: SCRAM-SHA-512"},
	{"sec-oauthbearer", "SASL_SSL: OAUTHBEARER"},
}

// toolFeature is the one feature of a command-line tool.
const toolFeature = "tool"

// Client is one column of the matrix (or, for a tool, one row of the
// tools table).
type Client struct {
	Key   string // as the drivers report it
	Title string
	Tool  bool   // a Kafka command-line tool: one feature, toolFeature
	Run   string // for a tool: what the check runs
	// Sec: the client runs the security section (secFeatures).
	Sec bool
	// From says where the version that runs comes from, and where it is
	// pinned.
	From string
	// NA lists the features the client lacks, with why; they are not run.
	NA map[string]string
}

const (
	noKIP848     = "the client has no KIP-848 consumer"
	librdkafkaV2 = "Debian's librdkafka 2.0.2 predates its KIP-848 consumer (2.10); the PyPI column runs it"
	goModule     = "Go module proxy, pinned in go.mod"
)

// clients are the columns, in the order of the document, and the tools.
var clients = []Client{
	{Key: "java", Title: "Java kafka-clients", Sec: true, From: "Maven Central, pinned in compat/java/pom.xml"},
	{Key: "franz-go", Title: "franz-go", Sec: true, From: goModule},
	{Key: "sarama", Title: "IBM/sarama", Sec: true, From: goModule,
		NA: map[string]string{"group-kip848": noKIP848}},
	{Key: "kafka-go", Title: "segmentio/kafka-go", Sec: true, From: goModule,
		NA: map[string]string{
			"sec-oauthbearer":    "kafka-go has no OAUTHBEARER mechanism (it has PLAIN and SCRAM)",
			"produce-idempotent": "kafka-go's Writer has no idempotent mode",
			"group-cooperative":  "kafka-go has no cooperative rebalance protocol (only eager Range and RoundRobin)",
			"group-kip848":       noKIP848,
			"transactions":       "kafka-go has no transactional producer",
		}},
	{Key: "kcat", Title: "kcat (librdkafka)", Sec: true, From: "Debian's package kcat",
		NA: map[string]string{
			"group-kip848":    librdkafkaV2,
			"offsets":         "kcat has no command that commits or fetches offsets on demand; see python3-confluent-kafka, the same librdkafka",
			"admin":           "kcat has no admin commands (only -L, metadata, used by the leader-change check)",
			"sec-oauthbearer": "Debian's librdkafka 2.0.2 is built without OIDC (libcurl), and kcat has no other way to be given a token than librdkafka's unsecured JWT (`enable.sasl.oauthbearer.unsecure.jwt`, `alg` none), which Strata refuses as Kafka's JWKS validator does; python3-confluent-kafka, the same librdkafka, passes with a token from its `oauth_cb`",
			"transactions":    "kcat's transactional producer (`-X transactional.id`) writes its whole input in one transaction, committed at the end of the input and aborted on a signal; it cannot commit a group's offsets in a transaction (consume-transform-produce), which the check needs. python3-confluent-kafka, the same librdkafka, runs it",
		}},
	{Key: "confluent-kafka-python", Title: "python3-confluent-kafka (librdkafka)", Sec: true, From: "Debian's package python3-confluent-kafka",
		NA: map[string]string{"group-kip848": librdkafkaV2}},
	{Key: "confluent-kafka-pypi", Title: "confluent-kafka from PyPI (librdkafka)", Sec: true,
		From: "PyPI, pinned in compat/python/requirements.txt; its wheel bundles librdkafka"},
	{Key: "kafkajs", Title: "kafkajs", Sec: true, From: "npm, pinned in compat/node/package.json",
		NA: map[string]string{
			"consume-partition": "kafkajs consumes only in groups (no assign)",
			"group-cooperative": "kafkajs has no cooperative rebalance protocol",
			"group-kip848":      noKIP848,
		}},

	{Key: "kafka-topics", Title: "kafka-topics", Tool: true,
		Run: "`--create` with a config, `--list`, `--alter --partitions`, `--describe`, `--delete`"},
	{Key: "kafka-configs", Title: "kafka-configs", Tool: true,
		Run: "`--alter --add-config` and `--delete-config` on a topic, `--describe` of a topic and of a broker with `--all`"},
	{Key: "kafka-consumer-groups", Title: "kafka-consumer-groups", Tool: true,
		Run: "`--list`, `--describe` (offsets and lag, `--members`), `--reset-offsets --to-earliest --execute`, `--delete`"},
	{Key: "kafka-leader-election", Title: "kafka-leader-election", Tool: true,
		Run: "`--election-type preferred` for one partition of a two-broker cluster"},
	{Key: "kafka-reassign-partitions", Title: "kafka-reassign-partitions", Tool: true,
		Run: "`--execute` then `--verify` of moving a partition to the other broker"},
	{Key: "kafka-transactions", Title: "kafka-transactions", Tool: true,
		Run: "`list`, `describe`, `describe-producers` and `find-hanging` of a transaction left open, then `abort` of it at its partition: a read_committed consumer reads past it and not its record"},
}

// cell names one client's feature.
type cell struct{ client, feature string }

// expectedFailures are the features that fail today, with the reason. The
// test fails when one of them passes, so that this list stays true; fix
// the broker, then remove the entry.
var expectedFailures = map[cell]string{
	// None today. An entry reads:
	// {"client", "feature"}: "what fails, the request and version, what the broker answers and what Kafka would",
}

// differences are what a client found where Strata answered otherwise
// than Kafka, kept in the document once fixed, so that the next reader
// knows what the matrix has caught: the client, what it sent, what Strata
// did, what Kafka does. A difference not fixed is an expectedFailures
// entry instead.
var differences = []string{
	"confluent-kafka 2.16.1 (librdkafka 2.16.0), KIP-848 consumer (issue 23): its first ConsumerGroupHeartbeat (v1, its own member id, epoch 0) carries its topic names, an empty SubscribedTopicRegex (\"\", not null) and an empty TopicPartitions. Strata refused the empty regex with INVALID_REQUEST, which librdkafka treats as fatal; Kafka 4.4 accepts it and an empty regex subscribes to nothing. Fixed: the validation is Kafka 4.4's, rule by rule (broker/group/consumer_heartbeat.go). A null TopicPartitions on a join is refused by both.",
}

// Status is the outcome of one check.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
)

// Outcome is what a check found.
type Outcome struct {
	Status Status
	Detail string
}

// Matrix holds every outcome and each client's version.
type Matrix struct {
	Versions map[string]string // client key -> version
	Outcomes map[cell]Outcome
}

// Problems compares the matrix with what this package declares and
// returns what is wrong: a feature not run, a not-applicable one that ran,
// an unexpected failure, an expected failure that passed.
func (m *Matrix) Problems() []string {
	var out []string
	for _, c := range clients {
		fs := c.features()
		if m.Versions[c.Key] == "" && !c.Tool {
			out = append(out, fmt.Sprintf("%s: no version reported", c.Key))
		}
		for _, f := range fs {
			o, ran := m.Outcomes[cell{c.Key, f}]
			reason, na := c.NA[f]
			why, expected := expectedFailures[cell{c.Key, f}]
			switch {
			case na && ran:
				out = append(out, fmt.Sprintf("%s %s: declared not applicable (%s) but ran: %s %s", c.Key, f, reason, o.Status, o.Detail))
			case na:
			case !ran:
				out = append(out, fmt.Sprintf("%s %s: not run (every feature runs or is declared not applicable)", c.Key, f))
			case o.Status == Fail && !expected:
				out = append(out, fmt.Sprintf("%s %s: FAIL: %s", c.Key, f, o.Detail))
			case o.Status != Fail && expected:
				out = append(out, fmt.Sprintf("%s %s: expected to fail (%s) but %s: %s; remove it from expectedFailures", c.Key, f, why, o.Status, o.Detail))
			}
		}
	}
	for k, o := range m.Outcomes {
		c := clientByKey(k.client)
		switch {
		case c == nil:
			out = append(out, fmt.Sprintf("unknown client %q reported %s %s", k.client, k.feature, o.Status))
		case !slices.Contains(c.features(), k.feature):
			out = append(out, fmt.Sprintf("%s reported %s %s, not one of its features", k.client, k.feature, o.Status))
		}
	}
	sort.Strings(out)
	return out
}

// features are the keys of the features c runs or declares not
// applicable.
func (c *Client) features() []string {
	if c.Tool {
		return []string{toolFeature}
	}
	var fs []string
	for _, f := range features {
		fs = append(fs, f.Key)
	}
	if c.Sec {
		for _, f := range secFeatures {
			fs = append(fs, f.Key)
		}
	}
	return fs
}

func clientByKey(key string) *Client {
	for i := range clients {
		if clients[i].Key == key {
			return &clients[i]
		}
	}
	return nil
}

// Render writes docs/compatibility.md. It uses only what is declared here
// and the pass/fail outcomes, so that it is the same from run to run.
func (m *Matrix) Render() string {
	var b strings.Builder
	var notes []string
	note := func(s string) string {
		for i, n := range notes {
			if n == s {
				return fmt.Sprintf("[%d]", i+1)
			}
		}
		notes = append(notes, s)
		return fmt.Sprintf("[%d]", len(notes))
	}
	cellText := func(c Client, f string) string {
		if reason, ok := c.NA[f]; ok {
			return "n/a " + note(reason)
		}
		o, ok := m.Outcomes[cell{c.Key, f}]
		switch {
		case !ok:
			return "untested"
		case o.Status == Pass:
			return "pass"
		default:
			if why, ok := expectedFailures[cell{c.Key, f}]; ok {
				return "**FAIL** " + note(why)
			}
			return "**FAIL**"
		}
	}

	b.WriteString("# Client compatibility\n\n")
	b.WriteString("Generated by `make compat` from the suite in `compat/`; do not edit by hand.\n")
	b.WriteString("`make test` runs the same suite and fails when this file is not what it finds.\n")
	b.WriteString("Each check drives a real Strata broker (one broker; two brokers on ZooKeeper\n")
	b.WriteString("for the leader change) and reads back what it wrote.\n\n")

	b.WriteString("## Clients\n\n")
	b.WriteString("The version each column ran. A pinned version is the newest its registry\n")
	b.WriteString("served when last checked; Debian's are what Debian's packages install.\n\n")
	b.WriteString("| client | version | from |\n|---|---|---|\n")
	for _, c := range clients {
		if !c.Tool {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Title, m.Versions[c.Key], c.From)
		}
	}
	b.WriteString("\n## Features\n\n| feature |")
	for _, c := range clients {
		if !c.Tool {
			fmt.Fprintf(&b, " %s |", c.Title)
		}
	}
	b.WriteString("\n|---|")
	for _, c := range clients {
		if !c.Tool {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, f := range features {
		fmt.Fprintf(&b, "| %s |", f.Title)
		for _, c := range clients {
			if !c.Tool {
				fmt.Fprintf(&b, " %s |", cellText(c, f.Key))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Security\n\n")
	for _, p := range securityIntro {
		b.WriteString(p + "\n")
	}
	b.WriteString("\n| listener, mechanism |")
	for _, c := range clients {
		if c.Sec {
			fmt.Fprintf(&b, " %s |", c.Title)
		}
	}
	b.WriteString("\n|---|")
	for _, c := range clients {
		if c.Sec {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, f := range secFeatures {
		fmt.Fprintf(&b, "| %s |", f.Title)
		for _, c := range clients {
			if c.Sec {
				fmt.Fprintf(&b, " %s |", cellText(c, f.Key))
			}
		}
		b.WriteString("\n")
	}
	var notSec []string
	for _, c := range clients {
		if !c.Tool && !c.Sec {
			notSec = append(notSec, c.Title)
		}
	}
	if len(notSec) > 0 {
		fmt.Fprintf(&b, "\n%s do not run this section yet.\n", strings.Join(notSec, " and "))
	}
	fmt.Fprintf(&b, "\n## Kafka's command-line tools\n\nRun as Java classes of `org.apache.kafka:kafka-tools` %s, in one JVM with the Java client.\n\n", m.Versions["java"])
	b.WriteString("| tool | what is run | result |\n|---|---|---|\n")
	for _, c := range clients {
		if c.Tool {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Title, c.Run, cellText(c, toolFeature))
		}
	}
	b.WriteString("\n## Notes\n\n")
	for i, n := range notes {
		fmt.Fprintf(&b, "%d. %s\n", i+1, n)
	}
	b.WriteString("\n## Differences found by clients, and fixed\n\n")
	for _, d := range differences {
		b.WriteString("- " + d + "\n")
	}
	b.WriteString("\n## What each feature checks\n\n")
	for _, line := range featureDocs {
		b.WriteString("- " + line + "\n")
	}
	return b.String()
}

// featureDocs say what the checks do, for the document.
var featureDocs = []string{
	"**produce, codec**: a producer with that compression codec writes 50 records (acks=all) and the same client reads them back in order.",
	"**idempotent produce**: the same with the client's idempotent producer.",
	"**consume assigned partitions**: records are read from partitions the client assigns itself, without a group.",
	"**group**: one member subscribes to a three-partition topic, is assigned all of it, reads every record and commits; the committed offsets are checked. The default assignor is the client's own default; cooperative is cooperative-sticky; KIP-848 uses `group.protocol=consumer` (ConsumerGroupHeartbeat).",
	"**commit and fetch offsets**: an offset (with metadata where the client has it) is committed and fetched back.",
	"**admin**: a topic is created (with a config where the client can), its configs described, then deleted.",
	"**metadata after a leader change**: on two brokers, a producer writes to a partition, its leader moves (preferred leader election), and the same producer writes again and its metadata names the new leader.",
	"**transactions**: a producer with a `transactional.id` commits a transaction of 10 records to the two partitions of a topic and aborts another of 10 (after they reached the broker); it then consumes 10 records of an input topic in a group (read_committed) and, in one transaction, writes a record for each and commits the group's offsets (`sendOffsetsToTransaction`, TxnOffsetCommit; franz-go with its GroupTransactSession, sarama with the group's generation and member id, kafkajs a transaction per batch). Zombie fencing: the producer begins a transaction, a second producer with the same `transactional.id` starts and commits one of its own, and the first one's commit must fail as fenced (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for older request versions). A read_committed consumer of the same client then reads the topic from the start and must find exactly the committed records, none of the aborted or fenced ones. Afterwards the suite checks with franz-go that the aborted records are in the log (read_uncommitted), so that there was something to skip, and that the group's committed offset is the one the transaction sent.",
}

// securityIntro opens the security table.
var securityIntro = []string{
	"A broker of its own, started once for this section, has a listener for each way in:",
	"`SSL` (TLS, no client certificate), `MTLS` (SSL with `ssl.client.auth=required`)",
	"and `SASL_SSL` with `sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER`.",
	"Its certificate comes from a CA made for the run; every client is given that CA",
	"and checks the certificate with it, and that it names 127.0.0.1, the address",
	"dialled (each client's default). The broker runs the ACL authorizer with",
	"`allow.everyone.if.no.acl.found=true`, and each row's topics (`<row>-<client>`,",
	"made beforehand) are open to one principal only, through a PREFIXED ACL:",
	"`User:compat-client` for mutual TLS, `User:alice` for PLAIN, `User:bob` for SCRAM,",
	"`User:carol` for OAUTHBEARER (before the clients run, `User:ANONYMOUS` is checked",
	"to be refused with TOPIC_AUTHORIZATION_FAILED); the TLS row's topics have no ACL,",
	"as its connections are `User:ANONYMOUS`. A cell passes when the client,",
	"configured as its documentation says, writes 50 records (acks=all) to its topic",
	"through that listener and reads the same records back, in order.",
	"",
	"- **mutual TLS**: the client presents a certificate of the CA with the subject",
	"  `CN=Compat-Client,OU=clients,O=Strata test`; the broker's",
	"  `ssl.principal.mapping.rules=" + mappingRules + "`",
	"  makes it `User:compat-client`, the only principal its topics are open to.",
	"- **PLAIN**: the user is in the listener's JAAS config",
	"  (`listener.name.sasl_ssl.plain.sasl.jaas.config`, `user_alice=\"…\"`).",
	"- **SCRAM**: `bob` has a SCRAM-SHA-256 and a SCRAM-SHA-512 credential (8192",
	"  iterations), made with AlterUserScramCredentials before the clients run.",
	"- **OAUTHBEARER**: the broker checks the JWT against a JWKS",
	"  (`sasl.oauthbearer.jwks.endpoint.url=file://…`, RS256) with",
	"  `sasl.oauthbearer.expected.audience` and `sasl.oauthbearer.expected.issuer` set;",
	"  the token's `sub` is `carol`. No real identity provider runs: the test signs",
	"  the tokens and serves an OAuth token endpoint (client credentials grant; the",
	"  client id and secret are checked). The Java client fetches its token there",
	"  with Kafka's `OAuthBearerLoginCallbackHandler` (`sasl.oauthbearer.token.endpoint.url`;",
	"  Kafka 4 needs the URL in the JVM's `org.apache.kafka.sasl.oauthbearer.allowed.urls`)",
	"  and PyPI's confluent-kafka with librdkafka's OIDC login (`sasl.oauthbearer.method=oidc`).",
	"  python3-confluent-kafka, whose librdkafka is built without OIDC, is given it by",
	"  its `oauth_cb`, a function of the application that fetches it at the same endpoint.",
	"  The Go clients and kafkajs fetch no token themselves: the application hands",
	"  them one (franz-go's `oauth.Oauth`, sarama's `AccessTokenProvider`, kafkajs's",
	"  `oauthBearerProvider`), here one the test signed.",
}

// mappingRules is the security broker's ssl.principal.mapping.rules.
const mappingRules = `RULE:^CN=([^,]*),OU=clients,O=.*$/$1/L,DEFAULT`
