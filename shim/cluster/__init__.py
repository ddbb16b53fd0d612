"""camus beside an Apache Kafka cluster (issue 27): the cluster holds the records, camus
filters them through its switch.

- `connection`: how to reach the cluster (bootstrap servers, client settings);
- `catalog`: the views (and source schemas) of one camus deployment, kept in the cluster in
  a compacted topic, so every instance of the deployment reads the same definitions;
- `materialise`: views written into the cluster exactly once, by Kafka transactions, the
  work shared between instances through Kafka's consumer groups;
- `cli`: `camus cluster ...`.
"""
