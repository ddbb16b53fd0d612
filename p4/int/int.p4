// camus application spec: INT 2.1 INT-MD hop metadata over UDP.
//
// The packet carries the INT shim (4 bytes), the INT-MD metadata header (12 bytes) and the
// metadata stack right after the UDP header (UDP-port signalling, spec section 5.7.2). The
// top of the stack is the most recent hop; its record is matched. The layout below is the
// record for instruction bitmap 0xF000 (bits 0-3: node id, level-1 ports, hop latency,
// queue id + occupancy; Hop ML = 4 words), which is what camus's telemetry source emits.
// Wire facts: ../../../shared/specs/wire-formats.md section 3.

header int_shim {
    bit<4>  int_type;            // 1 = INT-MD
    bit<2>  npt;
    bit<2>  reserved;
    bit<8>  length;              // 4-byte words after the shim
    bit<16> original_port;       // NPT=1: the original UDP destination port
}

header int_md {
    bit<4>  version;             // 2
    bit<1>  discard;
    bit<1>  hop_count_exceeded;
    bit<1>  mtu_exceeded;
    bit<12> reserved;
    bit<5>  hop_ml;
    bit<8>  remaining_hop_count;
    bit<16> instruction_bitmap;
    bit<16> domain_id;
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

header int_hop {
    bit<32> switch_id;           // "node id" since INT 2.1
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<8>  queue_id;
    bit<24> queue_occupancy;
}

@pragma udp_port(1337)
@pragma query_field_exact(int_hop.switch_id)
@pragma query_field(int_hop.hop_latency)
@pragma query_field(int_hop.queue_occupancy)
@pragma query_field(int_hop.ingress_port)
@pragma query_field(int_hop.egress_port)
