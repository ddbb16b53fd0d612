// camus application spec: the camus Kafka header.
//
// The broker shim reframes every Kafka record into fixed-width UDP packets: this header,
// then (a fragment of) the record itself. Topic and partition are the first things a
// subscription tests; a topic's schema maps its filterable fields onto the attribute slots
// (integers, or strings of up to 8 bytes, space-padded), so one static pipeline serves every
// topic. A record larger than one packet is split into fragments that all carry the same
// header but for the fragment fields, so every fragment gets the same forwarding decision.
//
// After the slots: the record's timestamp (Kafka's, milliseconds, as stored in the log), the
// time every state window runs on (docs/stateful.md, "Kafka views"), and two 32-bit lanes
// that carry the fields a stateful view averages, in the packets fed to that view (0 in
// every other packet).

header kafka {
    bit<32> topic_id;
    bit<32> partition;
    bit<64> offset;
    bit<16> fragment_index;
    bit<16> fragment_count;
    bit<32> record_length;
    bit<64> slot0;
    bit<64> slot1;
    bit<64> slot2;
    bit<64> slot3;
    bit<64> slot4;
    bit<64> slot5;
    bit<64> slot6;
    bit<64> slot7;
    bit<64> timestamp;
    bit<32> avg0;
    bit<32> avg1;
}

@pragma udp_port(9094)
@pragma query_field_exact(kafka.topic_id)
@pragma query_field(kafka.partition)
@pragma query_field(kafka.slot0)
@pragma query_field(kafka.slot1)
@pragma query_field(kafka.slot2)
@pragma query_field(kafka.slot3)
@pragma query_field(kafka.slot4)
@pragma query_field(kafka.slot5)
@pragma query_field(kafka.slot6)
@pragma query_field(kafka.slot7)

// State a view's filter may read (docs/stateful.md, "Kafka views"), every one with a window
// of one second (10^6 µs) on the records' timestamps and 65,536 register cells: one per view
// partition that uses it. One bank each: a view with state is fed its records on its own
// (under its own topic number), so no two rules with state are ever in scope of one packet.
@pragma query_timestamp(kafka.timestamp, ms)
@pragma query_banks(1)
@pragma query_counter(records, 1000000, 65536)
@pragma query_meter(arrivals, packets, 1000000, 65536)
@pragma query_average(kafka.avg0, 1000000, 65536)
@pragma query_average(kafka.avg1, 1000000, 65536)
