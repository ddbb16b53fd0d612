"""camus: packet subscriptions in the data plane, behind a Kafka-compatible broker."""

__version__ = "0.1.0"
