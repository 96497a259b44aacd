// A kafkajs consumer in a group shared with franz-go consumers. It uses
// kafkajs's round-robin assigner under franz-go's protocol name
// ("roundrobin") so that the group has a protocol every member supports.
// Prints "JOINED <generation>" on each join and "V <value>" per record;
// leaves the group on SIGTERM.
const { Kafka, logLevel, PartitionAssigners } = require('kafkajs');

const [broker, group, topic] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'kafkajs-member', brokers: [broker], logLevel: logLevel.ERROR, retry: { retries: 20, initialRetryTime: 100 } });
const roundrobin = (cfg) => ({ ...PartitionAssigners.roundRobin(cfg), name: 'roundrobin' });
const consumer = kafka.consumer({ groupId: group, partitionAssigners: [roundrobin], sessionTimeout: 6000, rebalanceTimeout: 10000, heartbeatInterval: 300 });

async function main() {
  await consumer.connect();
  consumer.on(consumer.events.GROUP_JOIN, (e) => console.log(`JOINED ${e.payload.groupProtocol} ${e.payload.memberId}`));
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommitThreshold: 1,
    eachMessage: async ({ message }) => { console.log(`V ${message.value.toString()}`); },
  });
}

process.on('SIGTERM', async () => {
  try { await consumer.disconnect(); } finally { process.exit(0); }
});
main().catch((e) => { console.error(e); process.exit(1); });
