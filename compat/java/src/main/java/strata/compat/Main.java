package strata.compat;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * The Java side of the client matrix: Apache Kafka's client and its
 * command-line tools, all in this one JVM. Each check prints one line
 * {@code RESULT <client>|<feature>|PASS|FAIL|<detail>} that the
 * Go test (compat/) parses. For the leader-change check it prints
 * {@code MOVE <topic>} and waits for a line on stdin once the harness has
 * moved the partition's leader.
 *
 * <p>Usage: Main BOOTSTRAP CLUSTER_SEEDS NEW_LEADER_ID; the security
 * checks read STRATA_COMPAT_SEC_*.
 */
public final class Main {
    static final int N = 50;
    static String bootstrap, cluster;
    static int newLeader;
    static final BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    static final PrintStream out = System.out;

    interface Check {
        String run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        cluster = args[1];
        newLeader = Integer.parseInt(args[2]);
        out.println("VERSION java " + AppInfoParser.getVersion());
        out.flush();
        // The security checks use a broker of their own: they run beside
        // the others, so that the JVM's part of the suite is not longer.
        Thread security = new Thread(() -> {
            for (String f : List.of("sec-tls", "sec-mtls", "sec-plain", "sec-scram-sha-256", "sec-scram-sha-512", "sec-oauthbearer")) {
                check("java", f, () -> security(f));
            }
        }, "security");
        security.start();

        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            check("java", "produce-" + codec, () -> produceReadBack("j-" + codec, codec, false));
        }
        check("java", "produce-idempotent", () -> produceReadBack("j-idem", "none", true));
        check("java", "consume-partition", Main::consumePartition);
        check("java", "group-default", () -> group("j-grp-default", Map.of()));
        check("java", "group-cooperative", () -> group("j-grp-coop",
                Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, "org.apache.kafka.clients.consumer.CooperativeStickyAssignor")));
        check("java", "group-kip848", () -> group("j-grp-848", Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer")));
        check("java", "offsets", Main::offsets);
        check("java", "admin", Main::admin);
        check("java", "leader-change", Main::leaderChange);
        check("java", "transactions", Main::transactions);

        // A tool's exit(0) returns (the tools end there anyway; some call it
        // inside their own try blocks); any other status ends the tool.
        Exit.setExitProcedure((code, msg) -> {
            if (code != 0) throw new ToolExit(code, msg);
        });
        check("kafka-topics", "tool", Main::kafkaTopics);
        check("kafka-configs", "tool", Main::kafkaConfigs);
        check("kafka-consumer-groups", "tool", Main::kafkaConsumerGroups);
        check("kafka-leader-election", "tool", Main::kafkaLeaderElection);
        check("kafka-reassign-partitions", "tool", Main::kafkaReassignPartitions);
        check("kafka-transactions", "tool", Main::kafkaTransactions);
        security.join();
        out.println("DONE");
        out.flush();
        System.exit(0);
    }

    static void check(String client, String feature, Check c) {
        String status = "PASS", detail;
        long start = System.nanoTime();
        try {
            detail = c.run();
        } catch (Throwable e) {
            status = "FAIL";
            detail = describe(e);
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        result(client, feature, status, detail + " (" + ms + " ms)");
    }

    static void result(String client, String feature, String status, String detail) {
        out.println("RESULT " + client + "|" + feature + "|" + status + "|" + detail.replace('\n', ' '));
        out.flush();
    }

    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (sb.length() > 0) sb.append(" <- ");
            sb.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) break;
        }
        return sb.toString();
    }

    static Properties common(String servers) {
        Properties p = new Properties();
        p.put("bootstrap.servers", servers);
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "20000");
        return p;
    }

    static Admin admin(String servers) {
        Properties p = common(servers);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return Admin.create(p);
    }

    static void createTopic(String servers, String topic, int partitions) throws Exception {
        try (Admin a = admin(servers)) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(20, TimeUnit.SECONDS);
        }
    }

    static KafkaProducer<String, String> producer(String servers, Map<String, String> extra) {
        Properties p = common(servers);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(String servers, Map<String, String> extra) {
        Properties p = common(servers);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Produces N records to partition 0 of a new topic and returns their values. */
    static List<String> produce(String topic, int partitions, Map<String, String> extra) throws Exception {
        createTopic(bootstrap, topic, partitions);
        List<String> values = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(bootstrap, extra)) {
            List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < N; i++) {
                String v = topic + "-value-" + i + "-" + "x".repeat(i % 13);
                values.add(v);
                fs.add(p.send(new ProducerRecord<>(topic, partitions == 1 ? 0 : i % partitions, "k" + i, v)));
            }
            for (var f : fs) f.get(30, TimeUnit.SECONDS);
        }
        return values;
    }

    /** Reads partitions 0..n-1 of topic from the start until want values are seen. */
    static List<String> readAssigned(String topic, int partitions, int want) {
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 20_000;
            while (got.size() < want && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r.value());
            }
        }
        return got;
    }

    static String produceReadBack(String topic, String codec, boolean idempotent) throws Exception {
        List<String> values = produce(topic, 1, Map.of(
                ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(idempotent)));
        List<String> got = readAssigned(topic, 1, N);
        if (!got.equals(values)) throw new IllegalStateException("read back " + got.size() + " records, not the " + N + " produced in order");
        return N + " records, codec " + codec + (idempotent ? ", idempotent" : "");
    }

    static String consumePartition() throws Exception {
        List<String> values = produce("j-assign", 3, Map.of());
        List<String> got = readAssigned("j-assign", 3, N);
        if (!new HashSet<>(got).equals(new HashSet<>(values)) || got.size() != N)
            throw new IllegalStateException("read " + got.size() + " records from 3 assigned partitions, want " + N);
        return N + " records from 3 assigned partitions";
    }

    static String group(String topic, Map<String, String> extra) throws Exception {
        List<String> values = produce(topic, 3, Map.of());
        Map<String, String> cfg = new java.util.HashMap<>(extra);
        cfg.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-g");
        Set<String> got = new HashSet<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, cfg)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < N && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : rs) got.add(r.value());
                if (!rs.isEmpty()) c.commitSync();
            }
            if (!got.equals(new HashSet<>(values)))
                throw new IllegalStateException("group consumer read " + got.size() + " of " + N + " records; assignment " + c.assignment());
            int assigned = c.assignment().size();
            if (assigned != 3) throw new IllegalStateException("assigned " + assigned + " partitions, want 3");
        }
        try (Admin a = admin(bootstrap)) {
            Map<TopicPartition, OffsetAndMetadata> off = a.listConsumerGroupOffsets(topic + "-g").partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
            long sum = off.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            if (sum != N) throw new IllegalStateException("committed offsets sum to " + sum + ", want " + N + ": " + off);
        }
        return "a member consumed all " + N + " records of 3 partitions and committed";
    }

    static String offsets() throws Exception {
        produce("j-offsets", 1, Map.of());
        String g = "j-offsets-g";
        TopicPartition tp = new TopicPartition("j-offsets", 0);
        try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of(ConsumerConfig.GROUP_ID_CONFIG, g))) {
            c.assign(List.of(tp));
            c.commitSync(Map.of(tp, new OffsetAndMetadata(17, "meta")));
            Map<TopicPartition, OffsetAndMetadata> got = c.committed(Set.of(tp), Duration.ofSeconds(15));
            OffsetAndMetadata om = got.get(tp);
            if (om == null || om.offset() != 17 || !"meta".equals(om.metadata()))
                throw new IllegalStateException("committed() = " + got + ", want offset 17 with metadata \"meta\"");
            c.seek(tp, c.committed(Set.of(tp)).get(tp));
            long deadline = System.currentTimeMillis() + 15_000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                if (!rs.isEmpty()) {
                    long first = rs.iterator().next().offset();
                    if (first != 17) throw new IllegalStateException("resumed at offset " + first + ", want 17");
                    return "commitSync 17, committed() 17 with metadata, resumed there";
                }
            }
            throw new IllegalStateException("no record after seeking to the committed offset");
        }
    }

    static String admin() throws Exception {
        String topic = "j-admin";
        try (Admin a = admin(bootstrap)) {
            a.createTopics(List.of(new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "3600000"))))
                    .all().get(20, TimeUnit.SECONDS);
            TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS).get(topic);
            if (d.partitions().size() != 2) throw new IllegalStateException("described " + d.partitions().size() + " partitions, want 2");
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = a.describeConfigs(List.of(r)).all().get(20, TimeUnit.SECONDS).get(r);
            ConfigEntry e = cfg.get("retention.ms");
            if (e == null || !"3600000".equals(e.value())) throw new IllegalStateException("retention.ms = " + e);
            a.deleteTopics(List.of(topic)).all().get(20, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 15_000;
            while (a.listTopics().names().get(20, TimeUnit.SECONDS).contains(topic)) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("topic still listed 15 s after delete");
                Thread.sleep(100);
            }
        }
        return "createTopics with a config, describeTopics, describeConfigs, deleteTopics";
    }

    /** Waits for the harness: prints MOVE topic and reads one line. */
    static void moveLeader(String topic) throws Exception {
        out.println("MOVE " + topic);
        out.flush();
        String line = stdin.readLine();
        if (line == null || !line.startsWith("MOVED")) throw new IllegalStateException("harness answered " + line + " to MOVE");
    }

    static String leaderChange() throws Exception {
        String topic = "lc-java";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = producer(cluster, Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            int before = p.partitionsFor(topic).get(0).leader().id();
            p.send(new ProducerRecord<>(topic, 0, "k", "before")).get(20, TimeUnit.SECONDS);
            moveLeader(topic);
            p.send(new ProducerRecord<>(topic, 0, "k", "after")).get(30, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 15_000;
            int after = -1;
            while (System.currentTimeMillis() < deadline) {
                after = p.partitionsFor(topic).get(0).leader().id();
                if (after == newLeader) break;
                Thread.sleep(200);
            }
            if (after != newLeader) throw new IllegalStateException("producer's metadata names leader " + after + ", want " + newLeader);
            try (Admin a = admin(cluster)) {
                int l = a.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS).get(topic).partitions().get(0).leader().id();
                if (l != newLeader) throw new IllegalStateException("describeTopics names leader " + l + ", want " + newLeader);
            }
            return "produced before and after the leader moved from " + before + " to " + after;
        }
    }

    static List<String> series(String prefix, int n) {
        List<String> vs = new ArrayList<>();
        for (int i = 0; i < n; i++) vs.add(prefix + "-" + i);
        return vs;
    }

    /** Sends values to partitions 0 and 1 of topic (value i to i%2) and waits until the broker has them. */
    static void sendAll(KafkaProducer<String, String> p, String topic, List<String> values) throws Exception {
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < values.size(); i++) fs.add(p.send(new ProducerRecord<>(topic, i % 2, null, values.get(i))));
        for (var f : fs) f.get(30, TimeUnit.SECONDS);
    }

    /**
     * The transactions check; compat/txn_test.go says what each step
     * writes. The harness made j-txn (two partitions) and j-txn-in (the
     * input records) beforehand.
     */
    static String transactions() throws Exception {
        String topic = "j-txn", in = topic + "-in";
        Map<String, String> txn = Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic, ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        String fencedBy;
        try (KafkaProducer<String, String> p1 = producer(bootstrap, txn)) {
            p1.initTransactions();
            p1.beginTransaction();
            sendAll(p1, topic, series("c", 10));
            p1.commitTransaction();
            p1.beginTransaction();
            sendAll(p1, topic, series("a", 10));
            p1.abortTransaction();

            // Consume-transform-produce in group j-txn-g.
            try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of(
                    ConsumerConfig.GROUP_ID_CONFIG, topic + "-g",
                    ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
                c.subscribe(List.of(in));
                List<String> outs = new ArrayList<>();
                Map<TopicPartition, OffsetAndMetadata> offsets = new java.util.HashMap<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (outs.size() < 10) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("consumed " + outs.size() + " of 10 records of " + in);
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        outs.add("t-" + r.value());
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                }
                p1.beginTransaction();
                sendAll(p1, topic, outs);
                p1.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p1.commitTransaction();
            }

            // Zombie fencing: p2's initTransactions fences p1.
            p1.beginTransaction();
            sendAll(p1, topic, series("z", 2));
            try (KafkaProducer<String, String> p2 = producer(bootstrap, txn)) {
                p2.initTransactions();
                p2.beginTransaction();
                sendAll(p2, topic, series("f", 2));
                p2.commitTransaction();
            }
            try {
                p1.commitTransaction();
                throw new IllegalStateException("the fenced producer's commitTransaction succeeded");
            } catch (org.apache.kafka.common.errors.ProducerFencedException | org.apache.kafka.common.errors.InvalidProducerEpochException e) {
                fencedBy = e.getClass().getSimpleName();
            }
        }

        List<String> want = new ArrayList<>(series("c", 10));
        for (int i = 0; i < 10; i++) want.add("t-in-" + i);
        want.addAll(series("f", 2));
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 20_000;
            while (got.size() < want.size() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r.value());
            }
        }
        List<String> g = new ArrayList<>(got), w = new ArrayList<>(want);
        java.util.Collections.sort(g);
        java.util.Collections.sort(w);
        if (!g.equals(w)) throw new IllegalStateException("read_committed consumer read " + g + ", want the committed " + w);
        return "committed, aborted, sendOffsetsToTransaction, zombie fenced (" + fencedBy + "); read_committed read the " + want.size() + " committed records";
    }

    // ---- the security section: one listener and mechanism per check, given
    // by the harness in STRATA_COMPAT_SEC_* (see compat/security_test.go) ----

    static String sec(String name) {
        String v = System.getenv("STRATA_COMPAT_SEC_" + name);
        if (v == null || v.isEmpty()) throw new IllegalStateException("STRATA_COMPAT_SEC_" + name + " is not set");
        return v;
    }

    /** The client configs of a security check, as Kafka's documentation gives them. */
    static Map<String, String> secConfig(String feature) {
        Map<String, String> c = new java.util.HashMap<>();
        c.put("ssl.truststore.type", "PEM");
        c.put("ssl.truststore.location", sec("CA"));
        switch (feature) {
            case "sec-tls" -> {
                c.put("bootstrap.servers", sec("SSL"));
                c.put("security.protocol", "SSL");
            }
            case "sec-mtls" -> {
                c.put("bootstrap.servers", sec("MTLS"));
                c.put("security.protocol", "SSL");
                c.put("ssl.keystore.type", "PEM");
                c.put("ssl.keystore.location", sec("KEYSTORE"));
            }
            case "sec-plain" -> {
                sasl(c, "PLAIN");
                c.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                        + sec("PLAIN_USER") + "\" password=\"" + sec("PLAIN_PASSWORD") + "\";");
            }
            case "sec-scram-sha-256", "sec-scram-sha-512" -> {
                sasl(c, feature.substring("sec-".length()).toUpperCase());
                c.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                        + sec("SCRAM_USER") + "\" password=\"" + sec("SCRAM_PASSWORD") + "\";");
            }
            case "sec-oauthbearer" -> {
                // Kafka's own login: client credentials at the token endpoint.
                sasl(c, "OAUTHBEARER");
                c.put("sasl.login.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler");
                c.put("sasl.oauthbearer.token.endpoint.url", sec("TOKEN_URL"));
                c.put("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\""
                        + sec("CLIENT_ID") + "\" clientSecret=\"" + sec("CLIENT_SECRET") + "\";");
            }
            default -> throw new IllegalArgumentException("no configuration for " + feature);
        }
        return c;
    }

    static void sasl(Map<String, String> c, String mechanism) {
        c.put("bootstrap.servers", sec("SASL_SSL"));
        c.put("security.protocol", "SASL_SSL");
        c.put("sasl.mechanism", mechanism);
    }

    static String security(String feature) throws Exception {
        Map<String, String> cfg = secConfig(feature);
        String servers = cfg.get("bootstrap.servers");
        String topic = feature + "-java";
        List<String> values = new ArrayList<>();
        Map<String, String> pcfg = new java.util.HashMap<>(cfg);
        pcfg.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<String, String> p = producer(servers, pcfg)) {
            List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < N; i++) {
                String v = topic + "-value-" + i + "-" + "x".repeat(i % 13);
                values.add(v);
                fs.add(p.send(new ProducerRecord<>(topic, 0, "k" + i, v)));
            }
            for (var f : fs) f.get(30, TimeUnit.SECONDS);
        }
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(servers, cfg)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 20_000;
            while (got.size() < N && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r.value());
            }
        }
        if (!got.equals(values)) throw new IllegalStateException("read back " + got.size() + " records, not the " + N + " produced in order");
        return N + " records over " + cfg.get("security.protocol") + (cfg.containsKey("sasl.mechanism") ? " " + cfg.get("sasl.mechanism") : "");
    }

    // ---- command-line tools, run in this JVM through their main classes ----

    static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code, String msg) {
            super("exit " + code + (msg == null ? "" : ": " + msg));
            this.code = code;
        }
    }

    /** Runs a tool's main, returning its stdout; a non-zero exit throws with what it printed. */
    static synchronized String tool(String name, Check main, String... args) throws Exception {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8);
        PrintStream oldOut = System.out, oldErr = System.err;
        System.setOut(capture);
        System.setErr(capture);
        int code = 0;
        String why = null;
        try {
            main.run();
        } catch (ToolExit e) {
            code = e.code;
            why = e.getMessage();
        } catch (Throwable e) {
            code = -1;
            why = describe(e);
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        if (code != 0) {
            throw new IllegalStateException(name + " " + String.join(" ", args) + ": " + why + "; output: " + text.trim());
        }
        return text;
    }

    static String topics(String... args) throws Exception {
        return tool("kafka-topics", () -> {
            org.apache.kafka.tools.TopicCommand.main(args);
            return null;
        }, args);
    }

    static String configs(String... args) throws Exception {
        return tool("kafka-configs", () -> {
            org.apache.kafka.tools.ConfigCommand.main(args);
            return null;
        }, args);
    }

    static String groups(String... args) throws Exception {
        return tool("kafka-consumer-groups", () -> {
            org.apache.kafka.tools.consumer.group.ConsumerGroupCommand.main(args);
            return null;
        }, args);
    }

    static String transactionsTool(String... args) throws Exception {
        return tool("kafka-transactions", () -> {
            org.apache.kafka.tools.TransactionsCommand.main(args);
            return null;
        }, args);
    }

    /**
     * A transaction left open in partition 0 of tool-txn: list, describe,
     * describe-producers and find-hanging show it, abort ends it at the
     * partition, and a read_committed consumer then reads past it.
     */
    static String kafkaTransactions() throws Exception {
        String t = "tool-txn", id = "tool-txn-id";
        createTopic(bootstrap, t, 1);
        try (KafkaProducer<String, String> p = producer(bootstrap, Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id,
                ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000"))) {
            p.initTransactions();
            p.beginTransaction();
            long first = p.send(new ProducerRecord<>(t, 0, null, "open")).get(20, TimeUnit.SECONDS).offset();
            String l = transactionsTool("--bootstrap-server", bootstrap, "list");
            require(l, id, "list");
            require(l, "Ongoing", "list");
            String d = transactionsTool("--bootstrap-server", bootstrap, "describe", "--transactional-id", id);
            require(d, "Ongoing", "describe");
            require(d, t + "-0", "describe");
            String dp = transactionsTool("--bootstrap-server", bootstrap, "describe-producers", "--topic", t, "--partition", "0");
            String[] rows = dp.trim().split("\n");
            String[] last = rows[rows.length - 1].trim().split("\\s+");
            if (rows.length < 2 || !last[last.length - 1].equals(Long.toString(first)))
                throw new IllegalStateException("describe-producers does not show the open transaction at offset " + first + ": " + dp.trim());
            transactionsTool("--bootstrap-server", bootstrap, "find-hanging", "--broker-id", "0");
            transactionsTool("--bootstrap-server", bootstrap, "abort", "--topic", t, "--partition", "0", "--start-offset", Long.toString(first));
            dp = transactionsTool("--bootstrap-server", bootstrap, "describe-producers", "--topic", t, "--partition", "0");
            require(dp, "None", "describe-producers after abort");
            try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
                TopicPartition tp = new TopicPartition(t, 0);
                long end = c.endOffsets(List.of(tp), Duration.ofSeconds(20)).get(tp);
                if (end <= first) throw new IllegalStateException("read_committed end offset " + end + " after abort, want past " + first);
                c.assign(List.of(tp));
                long deadline = System.currentTimeMillis() + 20_000;
                while (c.position(tp) < end) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("read_committed consumer stuck at " + c.position(tp) + " of " + end);
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200)))
                        throw new IllegalStateException("read_committed read the aborted record at offset " + r.offset());
                }
            }
        }
        return "list, describe, describe-producers, find-hanging and abort of an open transaction";
    }

    static void require(String text, String want, String what) {
        if (!text.contains(want)) throw new IllegalStateException(what + ": output lacks \"" + want + "\": " + text.trim());
    }

    static String kafkaTopics() throws Exception {
        String t = "tool-topics";
        topics("--bootstrap-server", bootstrap, "--create", "--topic", t, "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=7200000");
        require(topics("--bootstrap-server", bootstrap, "--list"), t, "--list");
        topics("--bootstrap-server", bootstrap, "--alter", "--topic", t, "--partitions", "3");
        String d = topics("--bootstrap-server", bootstrap, "--describe", "--topic", t);
        require(d, "PartitionCount: 3", "--describe");
        require(d, "retention.ms=7200000", "--describe");
        topics("--bootstrap-server", bootstrap, "--delete", "--topic", t);
        long deadline = System.currentTimeMillis() + 15_000;
        while (topics("--bootstrap-server", bootstrap, "--list").contains(t)) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("--list shows the topic 15 s after --delete");
            Thread.sleep(200);
        }
        return "--create, --list, --alter --partitions, --describe, --delete";
    }

    static String kafkaConfigs() throws Exception {
        String t = "tool-configs";
        createTopic(bootstrap, t, 1);
        configs("--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics", "--entity-name", t, "--add-config", "retention.ms=5400000,cleanup.policy=compact");
        String d = configs("--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics", "--entity-name", t);
        require(d, "retention.ms=5400000", "--describe topic");
        require(d, "cleanup.policy=compact", "--describe topic");
        configs("--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics", "--entity-name", t, "--delete-config", "retention.ms");
        d = configs("--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics", "--entity-name", t);
        if (d.contains("retention.ms=5400000")) throw new IllegalStateException("--delete-config left retention.ms: " + d.trim());
        String b = configs("--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all");
        require(b, "log.segment.bytes=", "--describe broker --all");
        return "--alter --add-config, --delete-config, --describe topics and brokers --all";
    }

    static String kafkaConsumerGroups() throws Exception {
        String t = "tool-groups", g = "tool-groups-g";
        produce(t, 2, Map.of());
        try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of(ConsumerConfig.GROUP_ID_CONFIG, g))) {
            c.subscribe(List.of(t));
            int n = 0;
            long deadline = System.currentTimeMillis() + 30_000;
            while (n < N && System.currentTimeMillis() < deadline) n += c.poll(Duration.ofMillis(200)).count();
            c.commitSync();
        }
        require(groups("--bootstrap-server", bootstrap, "--list"), g, "--list");
        String d = groups("--bootstrap-server", bootstrap, "--describe", "--group", g);
        require(d, t, "--describe");
        String lag0 = d;
        String r = groups("--bootstrap-server", bootstrap, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute");
        require(r, t, "--reset-offsets --execute");
        try (Admin a = admin(bootstrap)) {
            Map<TopicPartition, OffsetAndMetadata> off = a.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
            for (var e : off.entrySet())
                if (e.getValue().offset() != 0) throw new IllegalStateException("after --reset-offsets --to-earliest: " + off);
            if (off.size() != 2) throw new IllegalStateException("after --reset-offsets: offsets of " + off.size() + " partitions, want 2");
        }
        groups("--bootstrap-server", bootstrap, "--describe", "--group", g, "--members");
        groups("--bootstrap-server", bootstrap, "--delete", "--group", g);
        return "--list, --describe (" + (lag0.contains("LAG") ? "with lag" : "") + "), --reset-offsets --to-earliest --execute, --delete";
    }

    static String kafkaLeaderElection() throws Exception {
        String topic = "lc-tools";
        String o = tool("kafka-leader-election", () -> {
            org.apache.kafka.tools.LeaderElectionCommand.main("--bootstrap-server", cluster, "--election-type", "preferred", "--topic", topic, "--partition", "0");
            return null;
        }, "--election-type", "preferred", "--topic", topic, "--partition", "0");
        require(o, "Successfully completed leader election", "preferred election");
        try (Admin a = admin(cluster)) {
            int l = a.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS).get(topic).partitions().get(0).leader().id();
            if (l != newLeader) throw new IllegalStateException("leader " + l + " after the election, want " + newLeader);
        }
        return "--election-type preferred moved the leader to " + newLeader;
    }

    static String kafkaReassignPartitions() throws Exception {
        String topic = "tool-reassign";
        try (Admin a = admin(cluster)) {
            a.createTopics(List.of(new NewTopic(topic, Map.of(0, List.of(1))))).all().get(20, TimeUnit.SECONDS);
        }
        Path json = Files.createTempFile("reassign", ".json");
        Files.writeString(json, "{\"version\":1,\"partitions\":[{\"topic\":\"" + topic + "\",\"partition\":0,\"replicas\":[2]}]}");
        String[] exec = {"--bootstrap-server", cluster, "--reassignment-json-file", json.toString(), "--execute"};
        String o = tool("kafka-reassign-partitions", () -> {
            org.apache.kafka.tools.reassign.ReassignPartitionsCommand.main(exec);
            return null;
        }, "--execute");
        require(o, "Successfully started partition reassignment", "--execute");
        String[] verify = {"--bootstrap-server", cluster, "--reassignment-json-file", json.toString(), "--verify"};
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            String v = tool("kafka-reassign-partitions", () -> {
                org.apache.kafka.tools.reassign.ReassignPartitionsCommand.main(verify);
                return null;
            }, "--verify");
            if (v.contains("is completed")) break;
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("--verify 30 s after --execute: " + v.trim());
            Thread.sleep(500);
        }
        return "--execute and --verify moved a partition to broker 2";
    }
}
