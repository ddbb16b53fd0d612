// The paper's running example (Figures 4-6): an Add Order header with three query fields.
header itch_order {
    bit<16> stock_locate;
    bit<32> shares;
    bit<64> stock;
    bit<32> price;
}
@pragma query_field(itch_order.shares)
@pragma query_field(itch_order.price)
@pragma query_field_exact(itch_order.stock)
@pragma ascii(itch_order.stock)
