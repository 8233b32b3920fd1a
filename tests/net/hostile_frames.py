#!/usr/bin/python3
"""Hostile frames for a device, sent as raw Ethernet frames from the other end of the link:
the fuzz seeds' packets, readdressed to QPNs of the device's steering slot (never AVOID_QPN, a
live QP's), each once with a good ICRC for the frame it travels in (IPv4 IDs vary, as rxe's
do) and once with a bad one; then frames that pass every filter on the way (UDP 4791 to the
device, a BTH of its slot) but whose IPv4 or UDP lengths lie. Prints what it sent, as counts a
test can compare exactly:
  good=N bad=N framing=N
usage: hostile_frames.py IFNAME DST_MAC SRC_IP DST_IP SLOT AVOID_QPN SEEDS_DIR SEED"""
import random
import socket
import struct
import sys
import zlib

QPN_LOCAL_BITS = 18  # link/steering.hpp: 6 slot bits above 18 local ones


def mac(s):
    return bytes(int(x, 16) for x in s.split(':'))


def ip_header(src, dst, payload_len, ident, total=None):
    h = struct.pack('>BBHHHBBH4s4s', 0x45, 2, total if total is not None else 20 + payload_len, ident, 0x4000, 64,
                    17, 0, socket.inet_aton(src), socket.inet_aton(dst))
    s = sum(struct.unpack('>10H', h))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return h[:10] + struct.pack('>H', ~s & 0xffff) + h[12:]


def icrc(ip, udp, ib):
    """CRC32 of the masked pseudo-header and the IB packet without its ICRC (IBA A17.4)."""
    m = bytearray(b'\xff' * 8 + ip + udp + ib)
    m[8 + 1] = 0xff                       # TOS
    m[8 + 8] = 0xff                       # TTL
    m[8 + 10] = m[8 + 11] = 0xff          # IPv4 checksum
    m[8 + 20 + 6] = m[8 + 20 + 7] = 0xff  # UDP checksum
    m[8 + 28 + 4] = 0xff                  # BTH resv8a
    return struct.pack('<I', zlib.crc32(bytes(m)) & 0xffffffff)


def seeds(d):
    out = []
    for name in ('rc-send.bin', 'rc-write.bin', 'rc-read.bin', 'rc-atomic.bin', 'ud-send.bin', 'uc-send.bin'):
        b = open(f'{d}/{name}', 'rb').read()
        at = 0
        while at + 3 <= len(b):
            n = b[at + 1] << 8 | b[at + 2]
            if at + 3 + n > len(b):
                break
            if n >= 16:  # a BTH and an ICRC at least: the program looks at the BTH
                out.append(bytes(b[at + 3:at + 3 + n]))
            at += 3 + n
    return out


def main():
    ifname, dst_mac, src_ip, dst_ip = sys.argv[1:5]
    slot, avoid, seeds_dir, seed = int(sys.argv[5]), int(sys.argv[6], 0), sys.argv[7], int(sys.argv[8])
    rnd = random.Random(seed)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    src_mac = s.getsockname()[4]
    eth = mac(dst_mac) + src_mac + b'\x08\x00'
    good = bad = framing = 0
    for pkt in seeds(seeds_dir):
        qpn = avoid
        while qpn == avoid:
            qpn = slot << QPN_LOCAL_BITS | rnd.randrange(2, 1 << QPN_LOCAL_BITS)
        ib = bytearray(pkt[:-4])
        ib[5:8] = qpn.to_bytes(3, 'big')
        sport = rnd.randrange(49152, 65536)
        for damaged in (False, True):
            udp = struct.pack('>HHHH', sport, 4791, 8 + len(ib) + 4, 0)
            ip = ip_header(src_ip, dst_ip, 8 + len(ib) + 4, rnd.randrange(65536))
            crc = bytearray(icrc(ip, udp, bytes(ib)))
            if damaged:
                crc[rnd.randrange(4)] ^= 1 << rnd.randrange(8)
            s.send(eth + ip + udp + bytes(ib) + bytes(crc))
            if damaged:
                bad += 1
            else:
                good += 1
    # Lengths that lie: each frame has its BTH (the program steers it), the parser refuses it.
    body = bytes(12) + bytes(16)
    body = body[:5] + (slot << QPN_LOCAL_BITS | 2).to_bytes(3, 'big') + body[8:]
    udp = struct.pack('>HHHH', 50000, 4791, 8 + len(body), 0)
    frames = [
        ip_header(src_ip, dst_ip, len(udp) + len(body), 1, total=20 + len(udp) + len(body) + 300) + udp + body,
        ip_header(src_ip, dst_ip, len(udp) + len(body), 2) + struct.pack('>HHHH', 50000, 4791, 4, 0) + body,
        ip_header(src_ip, dst_ip, len(udp) + len(body), 3) + struct.pack('>HHHH', 50000, 4791, 8 + len(body) + 64, 0) + body,
    ]
    for f in frames:
        s.send(eth + f)
        framing += 1
    print(f'good={good} bad={bad} framing={framing}')


main()
