"""camus in front of an Apache Kafka cluster (issue 27): the cluster holds topics and records.

- `connection`: how camus reaches the cluster (bootstrap servers, security.protocol, SASL,
  TLS, timeouts, as a Kafka client takes them) and one asyncio connection to one broker.
- `front_door`: `camus serve --kafka`, a protocol-level proxy that forwards each client
  request to the broker that owns it and advertises camus as the cluster's only broker;
  `front_door_cli`, its flags on `camus serve`.
"""
