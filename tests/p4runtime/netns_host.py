"""A host inside a test's network namespace: `send IFACE HEX` or `recv PORT COUNT TIMEOUT`.

`send` writes one Ethernet frame (hex) on IFACE through an AF_PACKET socket. `recv` binds
UDP PORT on every address, prints `bound`, then one hex line per datagram payload until
COUNT came or TIMEOUT seconds passed. The namespace test runs it with `ip netns exec`.
"""

import socket
import sys
import time


def main() -> int:
    if sys.argv[1] == "send":
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((sys.argv[2], 0))
        s.send(bytes.fromhex(sys.argv[3]))
        return 0
    port, count, timeout = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    print("bound", flush=True)
    deadline = time.monotonic() + timeout
    got = 0
    while got < count and time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = s.recv(65535)
        except socket.timeout:
            break
        print(data.hex(), flush=True)
        got += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
