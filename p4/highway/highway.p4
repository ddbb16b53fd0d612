// camus application spec: motor highway monitoring (seed 000, section V-6, after the Linear
// Road benchmark).
//
// Every car carries a mote that sends a position report 10 times a second: one fixed-width
// header right after the UDP header, with the car's identifier, where it is and how fast it
// goes. A region's monitor subscribes to the speeding cars inside the region's rectangle:
//
//   x > 1200 and x < 1500 and y > 3000 and y < 3010 and spd > 55 : fwd(7)
//
// Coordinates are a flat map's, in units of 10 m (a GPS fix is good to about that) from its
// south-west corner: 16 bits cover 655 km each way. Speeds are whole miles per hour, as the
// paper's rule reads them. The other fields say which report this is and where on the road
// network it was taken; rules do not test them.

header position_report {
    bit<32> car_id;
    bit<32> seq;                 // the car's report number, from 0
    bit<32> time_ms;             // when the position was taken (ms from the traffic's start)
    bit<8>  highway;             // the road the car is on
    bit<8>  direction;           // 0: towards growing x (or y), 1: back
    bit<8>  lane;                // 0 is the rightmost
    bit<8>  flags;               // unused, 0
    bit<16> x;                   // tens of metres east
    bit<16> y;                   // tens of metres north
    bit<16> spd;                 // miles per hour
}

@pragma udp_port(4455)
@pragma query_field(position_report.x)
@pragma query_field(position_report.y)
@pragma query_field(position_report.spd)
