"""confluent-kafka-python (librdkafka) round trip for
specs/clients_security_test.go: produces COUNT records with values
PREFIX-0000.. to TOPIC, consumes them back as a new consumer group from the
beginning, commits synchronously, leaves the group, and prints every value it
consumed, one a line. Errors go to standard error.

usage: python3 confluent_roundtrip.py BROKER TOPIC GROUP PREFIX COUNT [KEY=VALUE ...]
The KEY=VALUE pairs are librdkafka properties (security.protocol, ssl.*, sasl.*).
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def main():
    broker, topic, group, prefix, count = sys.argv[1:6]
    count = int(count)
    conf = {"bootstrap.servers": broker, "client.id": "kaas-specs-confluent"}
    for kv in sys.argv[6:]:
        k, v = kv.split("=", 1)
        conf[k] = v
    values = ["%s-%04d" % (prefix, i) for i in range(count)]

    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(str(err))

    producer = Producer(dict(conf, acks="all", **{"enable.idempotence": True}))
    for i, v in enumerate(values):
        producer.produce(topic, key="k%d" % i, value=v, on_delivery=delivered)
    if producer.flush(30) != 0:
        raise SystemExit("produce: records still in flight after 30 s")
    if failures:
        raise SystemExit("produce: %d records failed, first: %s" % (len(failures), failures[0]))

    consumer = Consumer(dict(conf, **{
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }))
    consumer.subscribe([topic])
    got, seen = [], set()
    deadline = time.monotonic() + 30
    while len(seen) < count:
        if time.monotonic() > deadline:
            raise SystemExit("consume: %d of %d values within 30 s" % (len(seen), count))
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(msg.error())
        v = msg.value().decode()
        got.append(v)
        seen.add(v)
    consumer.commit(asynchronous=False)
    consumer.close()
    sys.stdout.write("".join(v + "\n" for v in got))


if __name__ == "__main__":
    main()
