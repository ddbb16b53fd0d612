"""What a switch inside a fabric decides per copy at its egress, beyond its tables.

A switch in a network of switches (docs/routing.md) has rules whose ports cannot depend on
where a packet came from. Three decisions therefore belong to the egress, per copy:
  1. a copy for the ingress port is dropped (a packet never goes back the way it came);
  2. a copy for the logical up port (511 by default) leaves by one of the physical up ports,
     `up[up_hash(frame) % len(up)]`, `frame` being the packet as it arrived (deterministic:
     a packet and every copy of it take one path);
  3. that copy is dropped if the packet came in on an up port (it never goes up again).
`controller.network.Fabric` (the network in one process) and `camus switch serve --fabric`
(one switch of the network as a process) both apply this one function, and the generated P4
program's fabric variant (`compiler.p4.fabric`) computes the same choice in its ingress:
the hash and its fields are `pipeline.fabric`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.fabric import HASHED, LOGICAL_UP, hash_input, up_hash

__all__ = ["HASHED", "LOGICAL_UP", "FabricEgress", "hash_input", "parse_up_ports", "up_hash"]


class FabricEgress:
    def __init__(self, up_ports: Sequence[int] = (), logical_up: int = LOGICAL_UP):
        self.up = tuple(up_ports)
        self.logical_up = logical_up

    def port(self, in_port: int, egress: int, frame: bytes) -> int | None:
        """The physical port a copy for `egress` of `frame` (the packet as it arrived on
        `in_port`) leaves by, or None if it is dropped."""
        if egress == self.logical_up and self.up:
            if in_port in self.up:
                return None
            egress = self.up[up_hash(frame) % len(self.up)]
        return None if egress == in_port else egress


def parse_up_ports(text: str) -> tuple[int, ...]:
    """`3,4` -> (3, 4); empty -> () (a core: no up ports). ValueError on anything else."""
    ports = tuple(int(p) for p in text.split(",") if p.strip())
    if any(not 0 <= p < LOGICAL_UP for p in ports):
        raise ValueError(f"up ports must be between 0 and {LOGICAL_UP - 1}: {text!r}")
    return ports
