"""A stand-in Pod peer for test_pod_hello_check.sh: listens on 127.0.0.1 (its port to the
file argv[1]), answers a daemon's Hello and then every PodHello as host argv[2] whose reply
says num_ipus argv[3] and free_ipus argv[4] and, when given, client_address argv[5]
(protobuf written by hand: ipuof.proto's Header request_id 1, hello_reply 4,
pod_hello_reply 71; PodHelloReply name 1, num_ipus 2, free_ipus 3, client_address 115).
Runs until killed."""
import socket
import struct
import sys

MAGIC = 0x49505546


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, data):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(data)
    return key + varint(len(data)) + data


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def request_id(header):
    """Field 1 (varint) of a Header, and the number of its body field."""
    i, rid, body = 0, 0, 0
    while i < len(header):
        key, i = decode_varint(header, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = decode_varint(header, i)
            if num == 1:
                rid = val
        elif wire == 2:
            ln, i = decode_varint(header, i)
            i += ln
            body = num
        else:
            raise ValueError("wire type %d" % wire)
    return rid, body


def decode_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def serve(conn, name, num, free, caddr):
    while True:
        head = read_exact(conn, 16)
        magic, _ver, _flags, hlen, plen = struct.unpack(">IHHII", head)
        assert magic == MAGIC
        rid, body = request_id(read_exact(conn, hlen))
        read_exact(conn, plen)
        if body == 3:  # Hello
            reply = field(1, 0, rid) + field(4, 2, field(1, 0, 1))
        else:  # PodHello
            reply = field(1, 0, rid) + field(71, 2, field(1, 2, name.encode()) +
                                             field(2, 0, num) + field(3, 0, free) +
                                             (field(115, 2, caddr.encode()) if caddr else b""))
        conn.sendall(struct.pack(">IHHII", MAGIC, 1, 0, len(reply), 0) + reply)


def main():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        conn, _ = srv.accept()
        try:
            serve(conn, sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                  sys.argv[5] if len(sys.argv) > 5 else "")
        except (EOFError, ConnectionError):
            pass
        conn.close()


main()
