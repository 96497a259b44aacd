// Produces N records to a topic that does not exist yet (kafkajs lets the
// broker auto-create it), then consumes them in a group and commits.
// Bootstrapped at one broker only. Prints "PRODUCED <n>", then
// "CONSUMED <n>" once every record was read, and exits 0.
const { Kafka, logLevel } = require('kafkajs');

const [broker, topic, group, n] = process.argv.slice(2);
const count = Number(n);
const kafka = new Kafka({ clientId: 'kafkajs-anybroker', brokers: [broker], logLevel: logLevel.ERROR, retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 } });

async function main() {
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  for (let i = 0; i < count; i++) {
    await producer.send({ topic, acks: -1, messages: [{ key: `k${i}`, value: `kafkajs-${i}` }] });
  }
  await producer.disconnect();
  console.log(`PRODUCED ${count}`);

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Set();
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommitThreshold: 1,
      eachMessage: async ({ message }) => {
        seen.add(message.value.toString());
        if (seen.size === count) resolve();
      },
    }).catch(reject);
  });
  await consumer.commitOffsets([]).catch(() => {});
  await consumer.disconnect();
  console.log(`CONSUMED ${seen.size}`);
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
