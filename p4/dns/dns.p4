// camus application spec: a DNS cache answered by the switch (the paper's DNS resolver,
// §V-5). A rule per cached name answers its queries from the switch:
//   name == "h105" : answerDNS(10.0.0.105)
// and a query no rule answers goes to the DNS server behind port 1 (the default action);
// `drop` is declared too (`qtype == 255 : drop` refuses ANY queries at the switch).
//
// framing(dns) reads a query (QR 0, opcode 0, one question) into a fixed-width message: the
// 12-byte DNS header, then the question with its name's wire form (each label's length byte
// and characters, then the root's zero byte) zero-padded to the name field's 8 bytes, then
// its type and class. A name whose wire form is longer than 8 bytes (a single label of at
// most 6 characters, or e.g. "h1.lan", "a.b.c"), a label over 63 bytes, a compressed name
// or a query with several questions matches no rule and gets the default action; so does
// any query whose name is spelt in other letter cases than the rule's (names are compared
// byte for byte). 8 bytes is the widest query field the pipeline's targets match
// (docs/actions.md, "DNS").

header dns {
    bit<16> id;
    bit<16> flags;
    bit<16> qdcount;
    bit<16> ancount;
    bit<16> nscount;
    bit<16> arcount;
}

header question {
    bit<64> name;                // the name's wire form, zero-padded
    bit<16> qtype;
    bit<16> qclass;
}

@pragma udp_port(53)
@pragma framing(dns)
@pragma query_field_exact(question.name)
@pragma query_field_exact(question.qtype)
@pragma action(answerDNS, drop)
@pragma default_action("fwd(1)")
