// camus application spec: hICN-style content requests (the paper's hICN workload, Table I,
// and its stateful application, §V: requests go to the caching forwarder only when their
// content is hot).
//
// hICN embeds a content identifier in the IPv6 destination address; this spec carries the
// identifier as one 64-bit field after a small fixed header, which is what the subscriptions
// test: `content == ID : fwd(H)`, exact match (SRAM), one entry per identifier.

header hicn {
    bit<8>  version;
    bit<8>  flags;
    bit<64> content;             // content identifier (the name's suffix in an hICN address)
    bit<48> timestamp;           // when the request was sent, µs (the requester's clock)
}

@pragma udp_port(9695)
@pragma query_field_exact(hicn.content)

// A request-rate meter per content identifier (docs/stateful.md, "hICN"): every rule that
// reads it has 65,536 buckets keyed by the identifier's low 16 bits, over 1 s windows.
//   rate(hot) >= 100 : fwd(1)     # hot: to the forwarder, whose cache likely holds it
//   rate(hot) < 100 : fwd(2)      # cold: upstream, towards the producer
// Two such rules are in the scope of every request, so each needs its own register bank.
@pragma query_meter(hot, packets, 1000000, 131072, hicn.content, 65536)
@pragma query_banks(2)
// Windows run on the requests' own send times, so a replay (and the reference evaluator)
// sees exactly what the switch saw, on any target.
@pragma query_timestamp(hicn.timestamp, us)
