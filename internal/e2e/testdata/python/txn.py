# A transactional librdkafka producer (Debian's python3-confluent-kafka):
# prints "FAILED <seconds> <error>" when init_transactions fails, "OK" when
# it succeeds. Usage: txn.py BOOTSTRAP
import sys
import time

import confluent_kafka as ck

p = ck.Producer({'bootstrap.servers': sys.argv[1], 'transactional.id': 'tx-librdkafka', 'log_level': 0})
start = time.time()
try:
    p.init_transactions(30)
    print("OK")
except ck.KafkaException as e:
    print("FAILED %.1f %s" % (time.time() - start, e.args[0].str()))
