// kafkajs round trip for specs/clients_security_test.go: produces COUNT
// records with values PREFIX-0000.. to TOPIC, consumes them back as a new
// consumer group from the beginning, commits, leaves the group, and prints
// every value it consumed, one a line. Logs go to standard error.
//
// usage: node kafkajs_roundtrip.js CONFIG_JSON
//   {"broker", "topic", "group", "prefix", "count",
//    "caFile", "certFile"?, "keyFile"?, "username"?, "password"?}
// kafkajs is found through NODE_PATH.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const cfg = JSON.parse(process.argv[2])

const ssl = { ca: [fs.readFileSync(cfg.caFile, 'utf8')] }
if (cfg.certFile) {
  ssl.cert = fs.readFileSync(cfg.certFile, 'utf8')
  ssl.key = fs.readFileSync(cfg.keyFile, 'utf8')
}
const kafka = new Kafka({
  clientId: 'kaas-specs-kafkajs',
  brokers: [cfg.broker],
  ssl,
  sasl: cfg.username ? { mechanism: 'scram-sha-512', username: cfg.username, password: cfg.password } : undefined,
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, log }) => {
    process.stderr.write(`[kafkajs] ${level} ${namespace}: ${JSON.stringify(log)}\n`)
  },
})

const values = []
for (let i = 0; i < cfg.count; i++) values.push(`${cfg.prefix}-${String(i).padStart(4, '0')}`)

async function main () {
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  await producer.send({ topic: cfg.topic, acks: -1, messages: values.map((v, i) => ({ key: `k${i}`, value: v })) })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: cfg.group, sessionTimeout: 6000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic: cfg.topic, fromBeginning: true })
  const got = []
  const seen = new Set()
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, e => reject(e.payload.error))
    consumer.run({
      eachMessage: async ({ message }) => {
        const v = message.value.toString()
        got.push(v)
        seen.add(v)
        if (seen.size >= values.length) resolve()
      },
    }).catch(reject)
  })
  // disconnect commits the resolved offsets and leaves the group.
  await consumer.disconnect()
  process.stdout.write(got.map(v => v + '\n').join(''))
}

const timer = setTimeout(() => {
  process.stderr.write('kafkajs round trip: no result within 45 s\n')
  process.exit(2)
}, 45000)
main().then(() => clearTimeout(timer), e => {
  process.stderr.write(`kafkajs round trip failed: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
