package strata.streams;

import java.io.IOException;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.internals.AppInfoParser;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Counts the records of an input topic per key into an output topic
 * (key, count as a long), with processing.guarantee=exactly_once_v2: each
 * commit writes the counts' changelog, the output and the input offsets
 * in one transaction. With no record cache, every input record makes one
 * output record, its key's count so far.
 *
 * <p>Usage: CountApp BOOTSTRAP INPUT OUTPUT APPLICATION_ID STATE_DIR
 * THREADS. It prints to stdout "VERSION kafka-streams V", "STATE S" at
 * each state change, "PROCESSED N" (records seen so far, reprocessing
 * included) each second when N changed, and "UNCAUGHT exception" when a
 * stream thread dies (the thread is replaced). It runs until its stdin
 * ends, then closes Kafka Streams and prints "CLOSED".
 */
public final class CountApp {
  public static void main(String[] args) throws Exception {
    if (args.length != 6) {
      System.err.println("usage: CountApp BOOTSTRAP INPUT OUTPUT APPLICATION_ID STATE_DIR THREADS");
      System.exit(2);
    }
    String bootstrap = args[0], input = args[1], output = args[2];
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args[5]));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
    // Internal topics (the counts' changelog) as the input and output.
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
    p.put(StreamsConfig.topicPrefix("min.insync.replicas"), "2");
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    // A restarted instance gets its tasks back without waiting long for
    // the killed one to leave the group.
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
    // No record cache: each count goes to the changelog and the output as
    // it changes, so that between two commits the open transaction holds
    // many writes that a crash must abort.
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);

    AtomicLong processed = new AtomicLong();
    StreamsBuilder b = new StreamsBuilder();
    b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .peek((k, v) -> processed.incrementAndGet())
        .groupByKey()
        .count(Materialized.as("counts"))
        .toStream()
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));

    System.out.println("VERSION kafka-streams " + AppInfoParser.getVersion());
    KafkaStreams streams = new KafkaStreams(b.build(), p);
    streams.setStateListener((now, before) -> System.out.println("STATE " + now));
    streams.setUncaughtExceptionHandler(e -> {
      System.out.println("UNCAUGHT " + e.toString().replace('\n', ' '));
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
    });

    ScheduledExecutorService tick = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "progress");
      t.setDaemon(true);
      return t;
    });
    long[] last = {-1};
    tick.scheduleAtFixedRate(() -> {
      long n = processed.get();
      if (n != last[0]) {
        last[0] = n;
        System.out.println("PROCESSED " + n);
      }
    }, 1, 1, TimeUnit.SECONDS);

    streams.start();
    try {
      while (System.in.read() != -1) {
        // the test closes stdin to stop us
      }
    } catch (IOException e) {
      // stdin gone: stop as well
    }
    tick.shutdownNow();
    boolean closed = streams.close(Duration.ofSeconds(30));
    System.out.println(closed ? "CLOSED" : "CLOSE TIMEOUT");
    System.exit(closed ? 0 : 1);
  }
}
