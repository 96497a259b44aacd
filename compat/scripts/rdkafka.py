# The librdkafka checks of the client matrix (compat/), run once with
# Debian's python3-confluent-kafka and once with PyPI's confluent-kafka
# (its own librdkafka) from a virtual environment. Prints one
# "RESULT client|feature|status|detail" line per check; for the leader
# change prints "MOVE topic" and waits for a line on stdin.
# Usage: rdkafka.py CLIENT BOOTSTRAP CLUSTER_SEEDS NEW_LEADER_ID
# (the security section reads STRATA_COMPAT_SEC_*; STRATA_COMPAT_SEC_OAUTH
# is oidc, librdkafka's own token fetching, or callback, the binding's
# oauth_cb)
# CLIENT is the matrix's key for this column; it also prefixes every topic
# and group, so that both columns share one broker.
import base64
import json
import os
import sys
import threading
import time
import urllib.request

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

CLIENT, bootstrap, cluster, new_leader = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
P = CLIENT + "-"
N = 50
# librdkafka's KIP-848 consumer (group.protocol=consumer) is in 2.10 on.
KIP848 = ck.libversion()[1] >= 0x020A0000


OUT = threading.Lock()  # one line at a time: the security checks run in threads


def result(feature, status, detail):
    with OUT:
        sys.stdout.write("RESULT %s|%s|%s|%s\n" % (CLIENT, feature, status, detail.replace("\n", " ")))
        sys.stdout.flush()


def check(feature, fn):
    start = time.time()
    try:
        detail = fn() or ""
        result(feature, "PASS", "%s (%.1f s)" % (detail, time.time() - start))
    except Exception as e:  # noqa: BLE001 - every failure is reported
        result(feature, "FAIL", "%s: %s (%.1f s)" % (type(e).__name__, e, time.time() - start))


def values(topic, n=N):
    return ["%s-value-%d-%s" % (topic, i, "0" * (i % 13)) for i in range(n)]


def admin(servers=bootstrap):
    return AdminClient({"bootstrap.servers": servers})


def create(topic, partitions, servers=bootstrap, config=None):
    a = admin(servers)  # alive until the future resolves
    fs = a.create_topics([NewTopic(topic, partitions, 1, config=config or {})], request_timeout=20)
    fs[topic].result(20)


def produce(topic, partitions, conf):
    p = ck.Producer(dict({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}, **conf))
    errs = []
    vs = values(topic)
    for i, v in enumerate(vs):
        p.produce(topic, v.encode(), partition=i % partitions, on_delivery=lambda err, msg: err and errs.append(err))
    if p.flush(30) != 0:
        raise RuntimeError("records still undelivered after 30 s")
    if errs:
        raise RuntimeError("delivery failed: %s" % errs[0])
    return vs


def read_assigned(topic, partitions, n):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": P + "unused", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    deadline = time.time() + 20
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            raise ck.KafkaException(m.error())
        got.append(m.value().decode())
    c.close()
    return got


def produce_check(topic, conf):
    def run():
        create(topic, 1)
        vs = produce(topic, 1, conf)
        got = read_assigned(topic, 1, N)
        if got != vs:
            raise RuntimeError("read back %d records, not the %d produced in order" % (len(got), N))
    return run


def consume_partition():
    create(P + "assign", 3)
    vs = produce(P + "assign", 3, {})
    got = read_assigned(P + "assign", 3, N)
    if sorted(got) != sorted(vs):
        raise RuntimeError("read %d records from 3 assigned partitions, want %d" % (len(got), N))


def group(topic, conf):
    def run():
        create(topic, 3)
        vs = produce(topic, 3, {})
        g = topic + "-g"
        c = ck.Consumer(dict({"bootstrap.servers": bootstrap, "group.id": g, "auto.offset.reset": "earliest",
                              "enable.auto.commit": False}, **conf))
        c.subscribe([topic])
        got = []
        deadline = time.time() + 30
        while len(got) < N and time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise ck.KafkaException(m.error())
            got.append(m.value().decode())
        c.commit(asynchronous=False)
        parts = c.committed([ck.TopicPartition(topic, p) for p in range(3)], 15)
        c.close()
        if sorted(got) != sorted(vs):
            raise RuntimeError("group consumer read %d of %d records" % (len(got), N))
        total = sum(tp.offset for tp in parts)
        if total != N:
            raise RuntimeError("committed offsets sum to %d, want %d" % (total, N))
    return run


def offsets():
    topic = P + "offsets"
    create(topic, 1)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic + "-g", "enable.auto.commit": False})
    # TopicPartition has metadata from confluent-kafka 2.0 on.
    try:
        tp, meta = ck.TopicPartition(topic, 0, 17, metadata="m17"), "m17"
    except TypeError:
        tp, meta = ck.TopicPartition(topic, 0, 17), None
    c.commit(offsets=[tp], asynchronous=False)
    got = c.committed([ck.TopicPartition(topic, 0)], 15)[0]
    c.close()
    if got.offset != 17 or (meta is not None and got.metadata != meta):
        raise RuntimeError("committed() = %s, want offset 17 metadata %s" % (got, meta))


def admin_check():
    a = admin()
    topic = P + "admin"
    a.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})], request_timeout=20)[topic].result(20)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = a.describe_configs([res])[res].result(20)
    if cfg["retention.ms"].value != "3600000":
        raise RuntimeError("retention.ms = %s" % cfg["retention.ms"].value)
    a.delete_topics([topic], request_timeout=20)[topic].result(20)
    deadline = time.time() + 15
    while topic in a.list_topics(timeout=10).topics:
        if time.time() > deadline:
            raise RuntimeError("topic still listed 15 s after delete")
        time.sleep(0.1)


def leader_change():
    topic = "lc-" + CLIENT
    p = ck.Producer({"bootstrap.servers": cluster, "acks": "all", "enable.idempotence": True})
    errs = []

    def send(v):
        p.produce(topic, v.encode(), partition=0, on_delivery=lambda err, msg: err and errs.append(err))
        if p.flush(30) != 0 or errs:
            raise RuntimeError("produce %s: %s" % (v, errs or "undelivered after 30 s"))
    send("before")
    print("MOVE " + topic, flush=True)
    line = sys.stdin.readline()
    if not line.startswith("MOVED"):
        raise RuntimeError("harness answered %r to MOVE" % line)
    send("after")
    deadline = time.time() + 15
    while True:
        leader = p.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        if leader == new_leader:
            return
        if time.time() > deadline:
            raise RuntimeError("metadata names leader %d, want %d" % (leader, new_leader))
        time.sleep(0.2)


def series(prefix, n):
    return ["%s-%d" % (prefix, i) for i in range(n)]


def send_all(p, topic, vs):
    """Sends vs to partitions 0 and 1 (value i to i%2) and waits until the
    broker has them."""
    errs = []
    for i, v in enumerate(vs):
        p.produce(topic, v.encode(), partition=i % 2, on_delivery=lambda err, msg: err and errs.append(err))
    if p.flush(30) != 0:
        raise RuntimeError("records still undelivered after 30 s")
    if errs:
        raise RuntimeError("delivery failed: %s" % errs[0])


def transactions():
    """compat/txn_test.go says what each step writes; the harness made the
    topic (two partitions) and its input topic beforehand."""
    topic = P + "txn"
    conf = {"bootstrap.servers": bootstrap, "transactional.id": topic}
    p1 = ck.Producer(conf)
    p1.init_transactions(30)
    p1.begin_transaction()
    send_all(p1, topic, series("c", 10))
    p1.commit_transaction(30)
    p1.begin_transaction()
    send_all(p1, topic, series("a", 10))
    p1.abort_transaction(30)

    # Consume-transform-produce in group <topic>-g.
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic + "-g", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe([topic + "-in"])
    outs = []
    deadline = time.time() + 30
    while len(outs) < 10:
        if time.time() > deadline:
            raise RuntimeError("consumed %d of 10 records of %s-in" % (len(outs), topic))
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            raise ck.KafkaException(m.error())
        outs.append("t-" + m.value().decode())
    p1.begin_transaction()
    send_all(p1, topic, outs)
    p1.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
    p1.commit_transaction(30)
    c.close()

    # Zombie fencing: p2's init_transactions fences p1.
    p1.begin_transaction()
    send_all(p1, topic, series("z", 2))
    p2 = ck.Producer(conf)
    p2.init_transactions(30)
    p2.begin_transaction()
    send_all(p2, topic, series("f", 2))
    p2.commit_transaction(30)
    try:
        p1.commit_transaction(30)
        raise RuntimeError("the fenced producer's commit_transaction succeeded")
    except ck.KafkaException as e:
        err = e.args[0]
        if err.code() not in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED, ck.KafkaError.INVALID_PRODUCER_EPOCH):
            raise RuntimeError("the fenced producer's commit_transaction: %s, want it fenced" % err)
        fenced_by = err.name()

    want = series("c", 10) + ["t-in-%d" % i for i in range(10)] + series("f", 2)
    r = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": P + "unused", "enable.auto.commit": False,
                     "isolation.level": "read_committed"})
    r.assign([ck.TopicPartition(topic, part, ck.OFFSET_BEGINNING) for part in (0, 1)])
    got = []
    deadline = time.time() + 20
    while len(got) < len(want) and time.time() < deadline:
        m = r.poll(0.2)
        if m is None:
            continue
        if m.error():
            raise ck.KafkaException(m.error())
        got.append(m.value().decode())
    r.close()
    if sorted(got) != sorted(want):
        raise RuntimeError("read_committed consumer read %s, want the committed %s" % (sorted(got), sorted(want)))
    return "committed, aborted, send_offsets_to_transaction, zombie fenced (%s); read_committed read the %d committed records" % (fenced_by, len(want))


# ---- the security section: one listener and mechanism per check, given
# by the harness in STRATA_COMPAT_SEC_* (see compat/security_test.go) ----

SEC = {k[len("STRATA_COMPAT_SEC_"):]: v for k, v in os.environ.items() if k.startswith("STRATA_COMPAT_SEC_")}


def fetch_token(_config):
    """oauth_cb: the application fetches a token at the token endpoint
    (client credentials) and hands it to librdkafka."""
    req = urllib.request.Request(SEC["TOKEN_URL"], data=b"grant_type=client_credentials", method="POST")
    cred = base64.b64encode(("%s:%s" % (SEC["CLIENT_ID"], SEC["CLIENT_SECRET"])).encode()).decode()
    req.add_header("Authorization", "Basic " + cred)
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    with urllib.request.urlopen(req, timeout=10) as r:
        body = json.load(r)
    return body["access_token"], time.time() + body["expires_in"]


def sec_conf(feature):
    tls = {"ssl.ca.location": SEC["CA"]}
    sasl = dict(tls, **{"bootstrap.servers": SEC["SASL_SSL"], "security.protocol": "SASL_SSL"})
    if feature == "sec-tls":
        return dict(tls, **{"bootstrap.servers": SEC["SSL"], "security.protocol": "SSL"})
    if feature == "sec-mtls":
        return dict(tls, **{"bootstrap.servers": SEC["MTLS"], "security.protocol": "SSL",
                            "ssl.certificate.location": SEC["CERT"], "ssl.key.location": SEC["KEY"]})
    if feature == "sec-plain":
        return dict(sasl, **{"sasl.mechanism": "PLAIN", "sasl.username": SEC["PLAIN_USER"], "sasl.password": SEC["PLAIN_PASSWORD"]})
    if feature.startswith("sec-scram-"):
        return dict(sasl, **{"sasl.mechanism": feature[len("sec-"):].upper(),
                             "sasl.username": SEC["SCRAM_USER"], "sasl.password": SEC["SCRAM_PASSWORD"]})
    if feature == "sec-oauthbearer" and SEC["OAUTH"] == "oidc":
        # librdkafka's own OIDC login: client credentials at the endpoint.
        return dict(sasl, **{"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                             "sasl.oauthbearer.client.id": SEC["CLIENT_ID"], "sasl.oauthbearer.client.secret": SEC["CLIENT_SECRET"],
                             "sasl.oauthbearer.token.endpoint.url": SEC["TOKEN_URL"]})
    if feature == "sec-oauthbearer" and SEC["OAUTH"] == "callback":
        return dict(sasl, **{"sasl.mechanism": "OAUTHBEARER", "oauth_cb": fetch_token})
    raise ValueError("no configuration for %s (OAUTH=%s)" % (feature, SEC.get("OAUTH")))


def sec_check(feature):
    def run():
        conf = sec_conf(feature)
        topic = "%s-%s" % (feature, CLIENT)
        p = ck.Producer(dict(conf, **{"acks": "all", "linger.ms": 5}))
        errs = []
        vs = values(topic)
        for v in vs:
            p.produce(topic, v.encode(), partition=0, on_delivery=lambda err, msg: err and errs.append(err))
        if p.flush(30) != 0:
            raise RuntimeError("records still undelivered after 30 s")
        if errs:
            raise RuntimeError("delivery failed: %s" % errs[0])
        c = ck.Consumer(dict(conf, **{"group.id": topic + "-unused", "enable.auto.commit": False}))
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        got = []
        deadline = time.time() + 20
        while len(got) < N and time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise ck.KafkaException(m.error())
            got.append(m.value().decode())
        c.close()
        if got != vs:
            raise RuntimeError("read back %d records, not the %d produced in order" % (len(got), N))
    return run


print("VERSION %s %s (librdkafka %s)" % (CLIENT, ck.__version__, ck.libversion()[0]), flush=True)
for codec in ("gzip", "snappy", "lz4", "zstd"):
    check("produce-" + codec, produce_check(P + codec, {"compression.type": codec}))
check("produce-idempotent", produce_check(P + "idem", {"enable.idempotence": True}))
check("consume-partition", consume_partition)
check("group-default", group(P + "grp-default", {}))
check("group-cooperative", group(P + "grp-coop", {"partition.assignment.strategy": "cooperative-sticky"}))
if KIP848:
    check("group-kip848", group(P + "grp-kip848", {"group.protocol": "consumer"}))
check("offsets", offsets)
check("admin", admin_check)
check("leader-change", leader_change)
check("transactions", transactions)
# Each security check has its own topic and connections: all at once.
threads = [threading.Thread(target=check, args=(f, sec_check(f)))
           for f in ("sec-tls", "sec-mtls", "sec-plain", "sec-scram-sha-256", "sec-scram-sha-512", "sec-oauthbearer")]
for th in threads:
    th.start()
for th in threads:
    th.join()
print("DONE", flush=True)
