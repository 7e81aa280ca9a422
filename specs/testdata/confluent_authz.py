"""confluent-kafka-python (librdkafka) against a broker that refuses it, for
specs/acl_test.go: produces one record to TOPIC, which the user may not
WRITE, and subscribes to TOPIC as GROUP, which the user may not READ; it
prints the error code librdkafka hands the application for each, as
"produce CODE" and "consume CODE" lines (0 when a record was delivered). Other errors go to standard error.

usage: python3 confluent_authz.py BROKER TOPIC GROUP [KEY=VALUE ...]
The KEY=VALUE pairs are librdkafka properties (security.protocol, sasl.*).
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer

# Codes the consumer may see before the refusal it waits for.
TRANSIENT = (KafkaError._PARTITION_EOF, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def main():
    broker, topic, group = sys.argv[1:4]
    conf = {"bootstrap.servers": broker, "client.id": "kaas-specs-confluent-authz"}
    for kv in sys.argv[4:]:
        k, v = kv.split("=", 1)
        conf[k] = v

    reports = []

    def delivered(err, _msg):
        reports.append(err)

    producer = Producer(dict(conf, acks="all", **{"message.timeout.ms": 20000}))
    producer.produce(topic, value=b"refused", on_delivery=delivered)
    if producer.flush(30) != 0 or not reports:
        raise SystemExit("produce: no delivery report within 30 s")
    # 0: the record was delivered.
    print("produce", 0 if reports[0] is None else reports[0].code())
    sys.stdout.flush()

    seen = []
    consumer = Consumer(dict(conf, **{
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "error_cb": lambda err: seen.append(err),
    }))
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    code = None
    while code is None:
        if time.monotonic() > deadline:
            raise SystemExit("consume: no refusal within 30 s (errors seen: %s)" % [str(e) for e in seen])
        msg = consumer.poll(0.5)
        errs = list(seen)
        seen.clear()
        if msg is not None and msg.error():
            errs.append(msg.error())
        elif msg is not None:
            code = 0  # a record was delivered
            break
        for err in errs:
            if err.code() in TRANSIENT:
                sys.stderr.write("consume: %s\n" % err)
                continue
            code = err.code()
            break
    print("consume", code)
    consumer.close()


if __name__ == "__main__":
    main()
