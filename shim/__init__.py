"""The Kafka broker shim: unmodified Kafka clients in front of the packet-subscription data plane.

`shim.protocol` is the sans-IO wire codec (frames, headers, per-API messages, record
batches); the server that owns sockets, topics, groups and logs is built on it.
"""
