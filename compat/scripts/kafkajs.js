// The kafkajs checks of the client matrix (compat/). Prints one
// "RESULT client|feature|status|detail" line per check; for the leader
// change prints "MOVE topic" and waits for a line on stdin.
// Usage: node kafkajs.js BOOTSTRAP CLUSTER_SEEDS NEW_LEADER_ID
// (NODE_PATH: node_modules of compat/node/package.json; the security
// section reads STRATA_COMPAT_SEC_*)
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');
const LZ4Codec = require('kafkajs-lz4');
const { ZstdCodec } = require('zstd-codec');
const readline = require('readline');

const CLIENT = 'kafkajs';
const N = 50;
const [bootstrap, cluster, newLeaderArg] = process.argv.slice(2);
const newLeader = Number(newLeaderArg);

// zstd through zstd-codec (Emscripten, no native build).
function zstdCodec() {
  const simple = new Promise((resolve) => ZstdCodec.run((z) => resolve(new z.Simple())));
  return () => ({
    async compress(encoder) { return Buffer.from((await simple).compress(encoder.buffer)); },
    async decompress(buffer) { return Buffer.from((await simple).decompress(buffer)); },
  });
}
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec;
CompressionCodecs[CompressionTypes.ZSTD] = zstdCodec();

const kafka = (servers) => new Kafka({ clientId: 'compat-kafkajs', brokers: servers.split(','), logLevel: logLevel.NOTHING, retry: { retries: 5 } });
const single = kafka(bootstrap);

function result(feature, status, detail) {
  console.log(`RESULT ${CLIENT}|${feature}|${status}|${String(detail).replace(/\n/g, ' ')}`);
}

async function check(feature, fn) {
  const start = Date.now();
  try {
    const d = (await fn()) || '';
    result(feature, 'PASS', `${d} (${Date.now() - start} ms)`);
  } catch (e) {
    result(feature, 'FAIL', `${e.name}: ${e.message} (${Date.now() - start} ms)`);
  }
}

const values = (topic) => Array.from({ length: N }, (_, i) => `${topic}-value-${i}-${'0'.repeat(i % 13)}`);

async function create(topic, partitions, configEntries = []) {
  const admin = single.admin();
  await admin.connect();
  try {
    const ok = await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions, replicationFactor: 1, configEntries }] });
    if (!ok) throw new Error(`createTopics ${topic}: not created`);
  } finally {
    await admin.disconnect();
  }
}

async function produce(topic, partitions, opts, compression) {
  const p = single.producer(opts);
  await p.connect();
  const vs = values(topic);
  try {
    await p.send({ topic, acks: -1, compression, messages: vs.map((v, i) => ({ value: v, partition: i % partitions })) });
  } finally {
    await p.disconnect();
  }
  return vs;
}

// consumeGroup reads n records of topic in group g and commits.
async function consumeGroup(topic, g, n) {
  const c = single.consumer({ groupId: g, maxWaitTimeInMs: 200 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${got.length} of ${n} records in 30 s`)), 30000);
    c.run({
      autoCommit: false,
      eachMessage: async ({ topic: t, partition, message }) => {
        got.push(message.value.toString());
        await c.commitOffsets([{ topic: t, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
        if (got.length >= n) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await c.disconnect();
  return got;
}

const sameSet = (got, want) => JSON.stringify([...got].sort()) === JSON.stringify([...want].sort());

function produceCheck(topic, compression, opts = {}) {
  return async () => {
    await create(topic, 1);
    const vs = await produce(topic, 1, opts, compression);
    const got = await consumeGroup(topic, `${topic}-reader`, N);
    if (JSON.stringify(got) !== JSON.stringify(vs)) throw new Error(`read back ${got.length} records, not the ${N} produced in order`);
  };
}

async function committedSum(g, topic) {
  const admin = single.admin();
  await admin.connect();
  try {
    const os = await admin.fetchOffsets({ groupId: g, topics: [topic] });
    return os[0].partitions.reduce((s, p) => s + Number(p.offset), 0);
  } finally {
    await admin.disconnect();
  }
}

async function groupDefault() {
  const topic = 'js-grp-default';
  await create(topic, 3);
  const vs = await produce(topic, 3, {});
  const got = await consumeGroup(topic, `${topic}-g`, N);
  if (!sameSet(got, vs)) throw new Error(`group consumer read ${got.length} of ${N} records`);
  const sum = await committedSum(`${topic}-g`, topic);
  if (sum !== N) throw new Error(`committed offsets sum to ${sum}, want ${N}`);
}

async function offsets() {
  const topic = 'js-offsets';
  const g = 'js-offsets-g';
  await create(topic, 1);
  const admin = single.admin();
  await admin.connect();
  try {
    await admin.setOffsets({ groupId: g, topic, partitions: [{ partition: 0, offset: '17' }] });
    const os = await admin.fetchOffsets({ groupId: g, topics: [topic] });
    const o = os[0].partitions.find((p) => p.partition === 0);
    if (!o || o.offset !== '17') throw new Error(`fetchOffsets = ${JSON.stringify(os)}, want 17`);
  } finally {
    await admin.disconnect();
  }
}

async function adminCheck() {
  const topic = 'js-admin';
  await create(topic, 2, [{ name: 'retention.ms', value: '3600000' }]);
  const admin = single.admin();
  await admin.connect();
  try {
    const { ConfigResourceTypes } = require('kafkajs');
    const r = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }] });
    const e = r.resources[0].configEntries.find((c) => c.configName === 'retention.ms');
    if (!e || e.configValue !== '3600000') throw new Error(`describeConfigs: ${JSON.stringify(r.resources[0])}`);
    await admin.deleteTopics({ topics: [topic], timeout: 20000 });
    const deadline = Date.now() + 15000;
    while ((await admin.listTopics()).includes(topic)) {
      if (Date.now() > deadline) throw new Error('topic still listed 15 s after delete');
      await new Promise((r2) => setTimeout(r2, 100));
    }
  } finally {
    await admin.disconnect();
  }
}

const lines = readline.createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => lines.once('line', resolve));

async function leaderChange() {
  const topic = `lc-${CLIENT}`;
  const k = kafka(cluster);
  const p = k.producer();
  await p.connect();
  try {
    await p.send({ topic, acks: -1, messages: [{ value: 'before', partition: 0 }] });
    const answer = nextLine();
    console.log(`MOVE ${topic}`);
    const line = await answer;
    if (!line.startsWith('MOVED')) throw new Error(`harness answered ${line} to MOVE`);
    await p.send({ topic, acks: -1, messages: [{ value: 'after', partition: 0 }] });
  } finally {
    await p.disconnect();
  }
  const admin = k.admin();
  await admin.connect();
  try {
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const l = md.topics[0].partitions[0].leader;
    if (l !== newLeader) throw new Error(`metadata names leader ${l}, want ${newLeader}`);
  } finally {
    await admin.disconnect();
  }
}

const series = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const toPartitions = (vs) => vs.map((v, i) => ({ value: v, partition: i % 2 }));

// The transactions check; compat/txn_test.go says what each step writes.
// The harness made js-txn (two partitions) and js-txn-in (the input
// records) beforehand.
async function transactions() {
  const topic = 'js-txn';
  const conf = { transactionalId: topic, idempotent: true, maxInFlightRequests: 1 };
  const p1 = single.producer(conf);
  const p2 = single.producer(conf);
  await p1.connect();
  let fencedBy;
  try {
    let txn = await p1.transaction(); // InitProducerId
    await txn.send({ topic, acks: -1, messages: toPartitions(series('c', 10)) });
    await txn.commit();
    txn = await p1.transaction();
    await txn.send({ topic, acks: -1, messages: toPartitions(series('a', 10)) });
    await txn.abort();

    // Consume-transform-produce in group js-txn-g, kafkajs's way: each
    // batch in a transaction with its offsets (sendOffsets).
    const g = `${topic}-g`;
    const c = single.consumer({ groupId: g, maxWaitTimeInMs: 200 });
    await c.connect();
    try {
      await c.subscribe({ topic: `${topic}-in`, fromBeginning: true });
      let n = 0;
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`consumed ${n} of 10 records in 30 s`)), 30000);
        c.run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            const t = await p1.transaction();
            try {
              await t.send({ topic, acks: -1, messages: toPartitions(batch.messages.map((m) => `t-${m.value}`)) });
              await t.sendOffsets({
                consumerGroupId: g,
                topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: (BigInt(batch.lastOffset()) + 1n).toString() }] }],
              });
              await t.commit();
            } catch (e) {
              await t.abort().catch(() => {});
              clearTimeout(timer);
              reject(e);
              throw e;
            }
            n += batch.messages.length;
            if (n >= 10) { clearTimeout(timer); resolve(); }
          },
        }).catch(reject);
      });
    } finally {
      await c.disconnect();
    }

    // Zombie fencing: p2's InitProducerId fences p1.
    txn = await p1.transaction();
    await txn.send({ topic, acks: -1, messages: toPartitions(series('z', 2)) });
    await p2.connect();
    const t2 = await p2.transaction();
    await t2.send({ topic, acks: -1, messages: toPartitions(series('f', 2)) });
    await t2.commit();
    try {
      await txn.commit();
    } catch (e) {
      fencedBy = e.type || (e.originalError && e.originalError.type) || `${e.name}: ${e.message}`;
    }
    if (!fencedBy) throw new Error("the fenced producer's commit succeeded");
    if (fencedBy !== 'PRODUCER_FENCED' && fencedBy !== 'INVALID_PRODUCER_EPOCH') throw new Error(`the fenced producer's commit: ${fencedBy}, want it fenced`);
  } finally {
    await p1.disconnect().catch(() => {});
    await p2.disconnect().catch(() => {});
  }

  // kafkajs reads read_committed unless told readUncommitted.
  const want = [...series('c', 10), ...series('t-in', 10), ...series('f', 2)];
  const r = single.consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 200 });
  await r.connect();
  const got = [];
  try {
    await r.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`read ${got.length} of ${want.length} records in 30 s: ${got}`)), 30000);
      r.run({
        eachMessage: async ({ message }) => {
          got.push(message.value.toString());
          if (got.length >= want.length) { clearTimeout(timer); resolve(); }
        },
      }).catch(reject);
    });
  } finally {
    await r.disconnect();
  }
  if (!sameSet(got, want)) throw new Error(`read_committed consumer read ${[...got].sort()}, want the committed ${[...want].sort()}`);
  return `committed, aborted, sendOffsets, zombie fenced (${fencedBy}); read_committed read the ${want.length} committed records`;
}

// ---- the security section: one listener and mechanism per check, given
// by the harness in STRATA_COMPAT_SEC_* (see compat/security_test.go) ----

const SEC = Object.fromEntries(Object.entries(process.env)
  .filter(([k]) => k.startsWith('STRATA_COMPAT_SEC_')).map(([k, v]) => [k.slice('STRATA_COMPAT_SEC_'.length), v]));

function secConfig(feature) {
  const fs = require('fs');
  const ca = [fs.readFileSync(SEC.CA)];
  const sasl = (mechanism, more) => ({ brokers: [SEC.SASL_SSL], ssl: { ca }, sasl: { mechanism, ...more } });
  switch (feature) {
    case 'sec-tls': return { brokers: [SEC.SSL], ssl: { ca } };
    case 'sec-mtls': return { brokers: [SEC.MTLS], ssl: { ca, cert: fs.readFileSync(SEC.CERT), key: fs.readFileSync(SEC.KEY) } };
    case 'sec-plain': return sasl('plain', { username: SEC.PLAIN_USER, password: SEC.PLAIN_PASSWORD });
    case 'sec-scram-sha-256': return sasl('scram-sha-256', { username: SEC.SCRAM_USER, password: SEC.SCRAM_PASSWORD });
    case 'sec-scram-sha-512': return sasl('scram-sha-512', { username: SEC.SCRAM_USER, password: SEC.SCRAM_PASSWORD });
    // kafkajs fetches no token itself: the application's provider hands it one.
    case 'sec-oauthbearer': return sasl('oauthbearer', { oauthBearerProvider: async () => ({ value: SEC.TOKEN }) });
    default: throw new Error(`no configuration for ${feature}`);
  }
}

function secCheck(feature) {
  return async () => {
    const topic = `${feature}-${CLIENT}`;
    const k = new Kafka({ clientId: 'compat-kafkajs', logLevel: logLevel.NOTHING, retry: { retries: 5 }, ...secConfig(feature) });
    const p = k.producer();
    await p.connect();
    const vs = values(topic);
    try {
      await p.send({ topic, acks: -1, messages: vs.map((v) => ({ value: v, partition: 0 })) });
    } finally {
      await p.disconnect();
    }
    // kafkajs consumes only in groups.
    const c = k.consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 200 });
    await c.connect();
    const got = [];
    try {
      await c.subscribe({ topic, fromBeginning: true });
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`read ${got.length} of ${N} records in 30 s`)), 30000);
        c.run({
          eachMessage: async ({ message }) => {
            got.push(message.value.toString());
            if (got.length >= N) { clearTimeout(timer); resolve(); }
          },
        }).catch(reject);
      });
    } finally {
      await c.disconnect();
    }
    if (JSON.stringify(got) !== JSON.stringify(vs)) throw new Error(`read back ${got.length} records, not the ${N} produced in order`);
  };
}

async function main() {
  console.log(`VERSION ${CLIENT} ${require('kafkajs/package.json').version}`);
  await check('produce-gzip', produceCheck('js-gzip', CompressionTypes.GZIP));
  await check('produce-snappy', produceCheck('js-snappy', CompressionTypes.Snappy));
  await check('produce-lz4', produceCheck('js-lz4', CompressionTypes.LZ4));
  await check('produce-zstd', produceCheck('js-zstd', CompressionTypes.ZSTD));
  await check('produce-idempotent', produceCheck('js-idem', CompressionTypes.None, { idempotent: true, maxInFlightRequests: 1 }));
  await check('group-default', groupDefault);
  await check('offsets', offsets);
  await check('admin', adminCheck);
  await check('leader-change', leaderChange);
  await check('transactions', transactions);
  // Each security check has its own topic and connections: all at once.
  await Promise.all(['sec-tls', 'sec-mtls', 'sec-plain', 'sec-scram-sha-256', 'sec-scram-sha-512', 'sec-oauthbearer']
    .map((f) => check(f, secCheck(f))));
  console.log('DONE');
}
main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
