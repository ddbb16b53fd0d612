"""camus in front of and beside an Apache Kafka cluster (issue 27): the cluster holds topics
and records, camus filters them through its switch.

- `connection`: how camus reaches the cluster (bootstrap servers, security.protocol, SASL,
  TLS, timeouts, as a Kafka client takes them), one asyncio connection to one broker, and
  the same settings as a confluent-kafka configuration for camus's own clients;
- `front_door`: `camus serve --kafka`, a protocol-level proxy that forwards each client
  request to the broker that owns it and advertises camus as the cluster's only broker;
  `front_door_cli`, its flags on `camus serve`;
- `catalog`: the views (and source schemas) of one camus deployment, kept in the cluster in
  a compacted topic, so every instance of the deployment reads the same definitions;
- `materialise`: views written into the cluster exactly once, by Kafka transactions, the
  work shared between instances through Kafka's consumer groups;
- `cli`: `camus cluster ...`.
"""
