"""The Kafka broker shim: unmodified Kafka clients in front of the packet-subscription data plane.

`shim.protocol` is the sans-IO wire codec (frames, headers, per-API messages, record
batches). `camus serve` (`shim.cli`) is built on it:

  server.py          asyncio sockets, one `ServerConnection` per client, requests in order
  handlers/          one module per API family, gathered into one dispatch table
  broker.py          topics, logs, views, groups, offsets, producers: the broker's state
  topics.py          topic definitions, `camus.*` configs, checked before a topic exists
  log.py             partition logs: segment files, retention, whole-batch reads
  datapath.py        records -> packets -> target -> endpoints; subscription diffs
  group_coordinator.py  the classic consumer-group state machine
  consumer_groups.py the KIP-848 consumer groups: broker-side assignment, member epochs
  client_regex.py    clients' regular expressions (KIP-848 subscriptions, ListTransactions)
                     compiled by RE2: linear time, so no pattern can stall the event loop
  fetch_sessions.py  incremental fetch sessions (KIP-227)
  producers.py       idempotent producers' sequence windows
  topic_client.py    `camus topic`: CreateTopics/DeleteTopics/Metadata from the command line
  schema.py, subscriptions.py, reframe.py   the Kafka mapping (fields, rules, packets)

The compiled record walk, JSON fields and reframing (Rust crate shim/native/) are
`shim.protocol._native`, loaded and checked once by `shim.protocol.native`, loud when it falls
back: beside the codec, which may import nothing of the server.
"""
