// A transactional kafkajs producer: prints "FAILED <seconds> <error>" when
// starting a transaction fails, "OK" when it succeeds.
const { Kafka, logLevel } = require('kafkajs');

const [broker] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'kafkajs-txn', brokers: [broker], logLevel: logLevel.NOTHING });
const producer = kafka.producer({ transactionalId: 'tx-kafkajs', idempotent: true, maxInFlightRequests: 1 });

async function main() {
  const start = Date.now();
  try {
    await producer.connect();
    const txn = await producer.transaction();
    await txn.abort();
    console.log('OK');
  } catch (e) {
    const cause = e.originalError || e.cause || {};
    console.log(`FAILED ${((Date.now() - start) / 1000).toFixed(1)} ${e.type || ''} ${e.message} ${cause.type || ''} ${cause.message || ''}`);
  }
  await producer.disconnect().catch(() => {});
}
main().then(() => process.exit(0));
