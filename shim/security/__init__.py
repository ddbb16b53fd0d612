"""Who a client is and what it may do: listeners, TLS, SASL, SCRAM users and Kafka ACLs.

- `listeners`: `PROTOCOL://HOST:PORT` as Kafka names them (PLAINTEXT, SSL, SASL_PLAINTEXT,
  SASL_SSL) and the security settings `camus serve` takes by flag or `--config`.
- `tls`: the server's `ssl.SSLContext` (TLS 1.2+) and the principal a client certificate
  names (its subject, as Kafka's default principal builder writes it).
- `users`: SCRAM credentials, salted, in the data dir; `camus user` and
  Describe/AlterUserScramCredentials edit them.
- `sasl`: one authentication exchange (PLAIN, SCRAM-SHA-256/512), sans-IO.
- `session`: a connection's authentication state: which requests it may send before and
  after authenticating, session lifetime and re-authentication (KIP-368).
- `acl`: ACL bindings, their store and the authorizer with Kafka's rules.
- `authorize`: the one place handlers ask "may this connection do that?".

Nothing here imports asyncio or sockets; `shim.server` applies it to connections.
"""
