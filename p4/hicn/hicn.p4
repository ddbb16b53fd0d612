// camus application spec: hICN-style content requests (the paper's hICN workload, Table I).
//
// hICN embeds a content identifier in the IPv6 destination address; this spec carries the
// identifier as one 64-bit field after a small fixed header, which is what the subscriptions
// test: `content == ID : fwd(H)`, exact match (SRAM), one entry per identifier.

header hicn {
    bit<8>  version;
    bit<8>  flags;
    bit<64> content;             // content identifier (the name's suffix in an hICN address)
}

@pragma udp_port(9695)
@pragma query_field_exact(hicn.content)
