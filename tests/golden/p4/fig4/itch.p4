// camus application spec: NASDAQ TotalView-ITCH 5.0 over MoldUDP64.
//
// Every packet carries a MoldUDP64 header and a batch of length-prefixed ITCH messages; the
// switch evaluates each message and sends each subscriber a copy holding only the messages
// its rules select. Add Order messages ('A', and 'F' which extends the same 36-byte layout
// with an attribution) are the subscription messages; other message types are never
// selected. Wire facts: ../../../shared/specs/wire-formats.md sections 1 and 2 (every
// integer big-endian; alpha fields left-justified and space-padded).

header mold {
    bit<80> session;
    bit<64> sequence_number;
    bit<16> message_count;
}

header itch_order {
    bit<8>  message_type;        // 'A' = 0x41, 'F' = 0x46
    bit<16> stock_locate;
    bit<16> tracking_number;
    bit<48> timestamp;           // nanoseconds past midnight
    bit<64> order_ref;
    bit<8>  buy_sell_indicator;  // 'B' or 'S'
    bit<32> shares;
    bit<64> stock;               // 8 ASCII characters, space-padded
    bit<32> price;               // Price(4): dollars * 10^4
}

@pragma udp_port(1234)
@pragma framing(moldudp64, mold)
@pragma message_type(itch_order.message_type, 0x41, 0x46)

@pragma query_field_exact(itch_order.stock)
@pragma query_field(itch_order.price)
@pragma query_field(itch_order.shares)
@pragma query_field_exact(itch_order.buy_sell_indicator)
@pragma ascii(itch_order.stock)
@pragma ascii(itch_order.buy_sell_indicator)

// The paper's Fig. 4: a packet counter over 100 µs tumbling windows, 1024 register slots.
@pragma query_counter(my_counter, 100, 1024)
