#!/usr/bin/python3
"""Hostile frames for a device, sent as raw Ethernet frames from the other end of the link:
the fuzz seeds' packets, readdressed to QPNs of the device's steering slot (never AVOID_QPN, a
live QP's), each once with a good ICRC for the frame it travels in (IPv4 IDs vary, as rxe's
do) and once with a bad one; then frames that pass every filter on the way (UDP 4791 to the
device, a BTH of its slot) but whose IPv4 or UDP lengths lie. Prints what it sent, as counts a
test can compare exactly:
  good=N bad=N framing=N
On a link of MTU 9000 (MTU given) one more lies in a jumbo frame, which AF_XDP receives in
several buffers.
usage: hostile_frames.py IFNAME DST_MAC SRC_IP DST_IP SLOT AVOID_QPN SEEDS_DIR SEED [MTU]
(IPv4 or IPv6 addresses, both of one version)"""
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


def ip6_header(src, dst, payload_len):
    return struct.pack('>IHBB16s16s', 0x60000000 | 2 << 20, payload_len, 17, 64, socket.inet_pton(socket.AF_INET6, src),
                       socket.inet_pton(socket.AF_INET6, dst))


def ones_sum(b):
    if len(b) % 2:
        b += b'\0'
    s = sum(struct.unpack(f'>{len(b) // 2}H', b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s


def with_udp6_checksum(ip, udp_and_payload):
    """IPv6 requires the UDP checksum: over the pseudo-header, the UDP header and payload."""
    pseudo = ip[8:40] + struct.pack('>IxxxB', len(udp_and_payload), 17)
    c = ~ones_sum(pseudo + udp_and_payload) & 0xffff
    return udp_and_payload[:6] + struct.pack('>H', c or 0xffff) + udp_and_payload[8:]


def icrc(ip, udp, ib):
    """CRC32 of the masked pseudo-header and the IB packet without its ICRC (IBA A17.4)."""
    m = bytearray(b'\xff' * 8 + ip + udp + ib)
    if len(ip) == 40:
        m[8] |= 0x0f                      # traffic class and flow label
        m[9] = m[10] = m[11] = 0xff
        m[8 + 7] = 0xff                   # hop limit
    else:
        m[8 + 1] = 0xff                   # TOS
        m[8 + 8] = 0xff                   # TTL
        m[8 + 10] = m[8 + 11] = 0xff      # IPv4 checksum
    u = 8 + len(ip)
    m[u + 6] = m[u + 7] = 0xff            # UDP checksum
    m[u + 8 + 4] = 0xff                   # BTH resv8a
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
    mtu = int(sys.argv[9]) if len(sys.argv) > 9 else 1500
    v6 = ':' in dst_ip
    rnd = random.Random(seed)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    src_mac = s.getsockname()[4]
    eth = mac(dst_mac) + src_mac + (b'\x86\xdd' if v6 else b'\x08\x00')

    def frame(udp_and_payload, ident, ip_len=None, udp_len=None):
        """IP, UDP, payload; ip_len/udp_len: what the headers claim, if not the truth."""
        n = len(udp_and_payload)
        if udp_len is not None:
            udp_and_payload = udp_and_payload[:4] + struct.pack('>H', udp_len) + udp_and_payload[6:]
        if v6:
            ip = ip6_header(src_ip, dst_ip, ip_len if ip_len is not None else n)
            return ip, with_udp6_checksum(ip, udp_and_payload)
        return ip_header(src_ip, dst_ip, n, ident, total=None if ip_len is None else 20 + ip_len), udp_and_payload

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
            ip, _ = frame(udp + bytes(ib) + bytes(4), rnd.randrange(65536))
            crc = bytearray(icrc(ip, udp, bytes(ib)))
            if damaged:
                crc[rnd.randrange(4)] ^= 1 << rnd.randrange(8)
            ip, u = frame(udp + bytes(ib) + bytes(crc), struct.unpack_from('>H', ip, 4)[0] if not v6 else 0)
            s.send(eth + ip + u)
            if damaged:
                bad += 1
            else:
                good += 1
    # Lengths that lie: each frame has its BTH (every filter steers it), the parser refuses it.
    body = bytes(5) + (slot << QPN_LOCAL_BITS | 2).to_bytes(3, 'big') + bytes(20)
    udp = struct.pack('>HHHH', 50000, 4791, 8 + len(body), 0)
    n = len(udp) + len(body)
    lies = [frame(udp + body, 1, ip_len=n + 300),  # the IP header claims more than the frame
            frame(udp + body, 2, udp_len=4),  # a UDP length shorter than its header
            frame(udp + body, 3, udp_len=n + 64)]  # a UDP length beyond the IP packet
    if mtu >= 9000:  # 8000 bytes, and an IP header that claims 300 more
        big = udp[:4] + struct.pack('>H', 8 + len(body) + 7900) + udp[6:] + body + bytes(7900)
        lies.append(frame(big, 4, ip_len=len(big) + 300))
    for ip, u in lies:
        s.send(eth + ip + u)
        framing += 1
    print(f'good={good} bad={bad} framing={framing}')


main()
