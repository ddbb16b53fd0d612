"""The demo's names, their addresses, which of them the switch caches, and the queries.

Names come in two kinds. Short ones (`h17`) fit the 8 bytes dns.p4 holds of a query name's
wire form, so the switch can have a rule for them. Long ones (`host17.camus.lan`, 18 bytes
on the wire) cannot: a rule naming one is refused, and their queries always reach the
server, however popular they are. Popularity is Zipf over a seeded shuffle of all the names,
so long names are spread through it; the cache is the most popular short names.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NAME_FIELD_BYTES = 8  # dns.p4: question.name is bit<64>


def wire_length(name: str) -> int:
    """Bytes of `name`'s wire form: a length byte and the characters per label, the root's 0."""
    return sum(1 + len(label) for label in name.rstrip(".").split(".")) + 1


def fits(name: str) -> bool:
    return wire_length(name) <= NAME_FIELD_BYTES


def address(k: int) -> str:
    """The address of name number `k`: 10.53.k/256.k%256 (distinct for k < 65536)."""
    return f"10.53.{k >> 8 & 255}.{k & 255}"


@dataclass(frozen=True)
class Workload:
    names: int = 200        # names the server knows
    long_every: int = 4     # every Nth name is a long one (no rule can name it)
    cache: int = 40         # short names the switch answers (the most popular)
    queries: int = 2000     # queries per run
    zipf: float = 1.0       # popularity exponent: weight of rank r is 1 / r**zipf
    seed: int = 1

    def check(self) -> None:
        if not 1 <= self.names <= 65536:
            raise ValueError("--names: 1..65536 (the addresses are 10.53.x.y)")
        if self.long_every < 0:
            raise ValueError("--long-every: 0 (no long names) or more")
        if self.cache < 0 or self.queries < 1 or self.zipf < 0:
            raise ValueError("--cache, --queries and --zipf must be non-negative (--queries at least 1)")
        if self.cache > len(self.short_names()):
            raise ValueError(f"--cache {self.cache}: only {len(self.short_names())} of the names are short enough "
                             f"for a rule ({NAME_FIELD_BYTES} bytes on the wire)")

    def name_list(self) -> list[str]:
        """Name k, in index order (index k has address(k))."""
        return [f"host{k}.camus.lan" if self.long_every and k % self.long_every == self.long_every - 1
                else f"h{k}" for k in range(self.names)]

    def short_names(self) -> list[str]:
        return [n for n in self.name_list() if fits(n)]

    def by_popularity(self) -> list[str]:
        """All names, most popular first (a seeded shuffle of the index order)."""
        names = self.name_list()
        random.Random(self.seed).shuffle(names)
        return names

    def cached(self) -> list[str]:
        """The names the switch answers: the `cache` most popular short ones."""
        return [n for n in self.by_popularity() if fits(n)][:self.cache]

    def addresses(self) -> dict[str, str]:
        return {n: address(k) for k, n in enumerate(self.name_list())}

    def query_names(self) -> list[str]:
        """The names queried, in order: Zipf draws over the popularity ranks (seeded)."""
        ranked = self.by_popularity()
        weights = [1.0 / (r + 1) ** self.zipf for r in range(len(ranked))]
        return random.Random(self.seed + 1).choices(ranked, weights, k=self.queries)

    def rules(self, with_cache: bool) -> str:
        """One subscription per cached name (none for the baseline)."""
        if not with_cache:
            return "# baseline: no subscriptions; every query gets the default action, fwd(1), the server\n"
        addresses = self.addresses()
        return "".join(f'name == "{n}" : answerDNS({addresses[n]})\n' for n in self.cached())

    def hosts_file(self) -> str:
        """The server's hosts file (dnsmasq --addn-hosts): every name, cached or not."""
        return "".join(f"{ip} {n}\n" for n, ip in self.addresses().items())
