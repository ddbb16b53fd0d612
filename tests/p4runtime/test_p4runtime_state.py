"""The software switch's P4Runtime server holds a stateful pipeline's registers (IR 4):
RegisterEntry reads return the cells the data plane keeps (packed as docs/pipeline-ir.md
says), MODIFY writes set one cell or zero a whole bank (what a controller does for the cells
a new rule takes over), and bad writes come back with their P4Runtime codes. Real gRPC on
127.0.0.1, both data planes."""

from __future__ import annotations

import struct

import grpc
import pytest

from compiler.compile import compile_text
from controller.p4runtime_client import P4RuntimeClient, WriteError
from p4rt.p4info import build_p4info
from p4rt.protos import p4runtime_pb2
from p4rt.values import encode
from pipeline import document
from pipeline.interpreter import pack_cell
from switch.device import Device, PipelineConfig
from switch.p4runtime_server import serve
from p4runtime_helpers import ITCH_SPEC, frame

Update = p4runtime_pb2.Update
SPEC = ITCH_SPEC + "@pragma query_counter(my_counter, 100, 64)\n"
RULES = 'my_counter > 2 : fwd(2)\nstock == "GOOGL" and my_counter < 2 : fwd(3), count(my_counter)\n'


def p4info_with_registers(pipeline):
    """The software switch's P4Info for `pipeline`, listing each state's banks as registers
    (p4rt's P4Info lists them once the P4 target's state work is in; until then they are
    added here the same way: name CamusIngress.<R>, cell width, slots)."""
    info = build_p4info(pipeline, counters=True)
    if not info.registers:
        next_id = 0x05000001
        for app in pipeline.applications:
            for var in app.state.vars if app.state else ():
                for r in var.registers:
                    reg = info.registers.add()
                    reg.preamble.id, reg.preamble.name, reg.preamble.alias = next_id, f"CamusIngress.{r}", r
                    reg.type_spec.bitstring.bit.bitwidth = var.cell_width
                    reg.size = var.slots
                    next_id += 1
    return info


def order(stock: str) -> bytes:
    return (b"A" + struct.pack("!HH", 1, 0) + (1).to_bytes(6, "big") + struct.pack("!Q", 1) + b"B"
            + struct.pack("!I", 100) + stock.encode().ljust(8) + struct.pack("!I", 10))


@pytest.fixture(params=["native", "python"])
def stateful_switch(request):
    c = compile_text(SPEC, RULES, name="itch")
    info = p4info_with_registers(c.pipeline)
    device = Device(request.param)
    device.install(PipelineConfig(c.pipeline, info, document.dumps(c.pipeline).encode()), c.entries)
    server, port = serve(device, "127.0.0.1:0", max_workers=8)
    with P4RuntimeClient.primary(f"127.0.0.1:{port}", election_id=10, timeout=5) as client:
        yield c, info, device, client
    server.stop(0).wait(5)


def register_ids(info) -> dict[str, int]:
    return {r.preamble.alias: r.preamble.id for r in info.registers}


def read(client, register_id: int = 0, index: int | None = None) -> dict[tuple[int, int], bytes]:
    q = p4runtime_pb2.RegisterEntry(register_id=register_id)
    if index is not None:
        q.index.index = index
    return {(e.register_entry.register_id, e.register_entry.index.index): e.register_entry.data.bitstring
            for e in client.read([p4runtime_pb2.Entity(register_entry=q)])}


def modify(register_id: int, value: bytes, index: int | None = None, op=Update.MODIFY) -> Update:
    e = p4runtime_pb2.RegisterEntry(register_id=register_id)
    if index is not None:
        e.index.index = index
    e.data.bitstring = value
    return Update(type=op, entity=p4runtime_pb2.Entity(register_entry=e))


def test_registers_read_and_written_over_p4runtime(stateful_switch):
    c, info, device, client = stateful_switch
    var = c.pipeline.applications[0].state.vars[0]
    ids = register_ids(info)
    counter = next(i for i in c.entries["state_instances"] if i["rule"].startswith("my_counter"))
    reg, cell = var.registers[counter["bank"]], counter["base"]
    for ts in (250, 260, 270):
        device.process(frame([order("MSFT")]), 0, ts)
    cells = read(client)
    assert len(cells) == var.banks * var.slots  # every cell of every bank
    assert cells[ids[reg], cell] == encode(pack_cell(var, 2, 3, 0), var.cell_width)  # window 2, n 3
    assert read(client, ids[reg], cell) == {(ids[reg], cell): cells[ids[reg], cell]}

    # One cell set, then the whole bank zeroed (index unset): the data plane holds it.
    client.write([modify(ids[reg], encode(pack_cell(var, 2, 7, 0), var.cell_width), cell)])
    assert device.dataplane.read_cell(reg, cell) == pack_cell(var, 2, 7, 0)
    out = device.process(frame([order("MSFT")]), 0, 280)  # n 8 > 2 in window 2
    assert [p for p, _ in out] == [2]
    client.write([modify(ids[reg], b"\x00")])
    assert all(v == b"\x00" for (rid, _), v in read(client, ids[reg]).items())
    assert device.process(frame([order("MSFT")]), 0, 290) == []  # counting again from 1


def test_bad_register_writes_and_reads(stateful_switch):
    c, info, device, client = stateful_switch
    var = c.pipeline.applications[0].state.vars[0]
    rid = register_ids(info)[var.registers[0]]
    updates = [modify(rid, b"\x01", 0, op=Update.INSERT),          # registers are only modified
               modify(0x05FFFFFF, b"\x01", 0),                    # no such register
               modify(rid, b"\x01", var.slots),                   # past its cells
               modify(rid, (1 << var.cell_width).to_bytes(11, "big"), 0)]  # wider than a cell
    with pytest.raises(WriteError) as exc:
        client.write(updates)
    assert [(e.index, e.code_name) for e in exc.value.errors] == \
        [(0, "INVALID_ARGUMENT"), (1, "NOT_FOUND"), (2, "OUT_OF_RANGE"), (3, "OUT_OF_RANGE")]
    assert device.dataplane.read_cell(var.registers[0], 0) == 0
    with pytest.raises(grpc.RpcError):
        read(client, rid, var.slots)
