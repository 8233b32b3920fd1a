// Feeds arbitrary packets to a connected RC requester/responder pair and an XRC initiator/target
// pair with work outstanding on both sides. Input: records of [flags][len hi][len lo][bytes].
// Flag bits ask the harness to aim the packet (bit 0: at the requester side instead of the
// responder side; bit 1: set the destination QPN; bit 2: set the PSN near the expected one;
// bit 3: fix the ICRC), the top bit of len hi at the XRC pair instead of the RC one and the next
// at the tag matching pair (B's QP on a tag matching SRQ with tags posted), so the fuzzer
// reaches the transport logic instead of stopping at the first check.
// Registered regions sit between canaries: any byte written outside them aborts the run.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/bringup.hpp"
#include "transport/protocol_core.hpp"
#include "wire/bytes.hpp"
#include "wire/icrc.hpp"

using namespace uroce;

namespace {

constexpr size_t kGuard = 4096, kArena = 16384;
constexpr uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002;
constexpr uint8_t kCanary = 0xa5;

struct Side {
  transport::ProtocolCore pc;
  verbs::PdHandle pd;
  verbs::Cq* cq;
  transport::Qp* qp;
  transport::Qp* xqp;  // A: an XRC initiator; B: an XRC target of its domain, with an XRC SRQ
  verbs::Srq* xsrq = nullptr;
  transport::Qp* tqp;  // the tag matching pair; B's draws from tsrq
  verbs::Srq* tsrq = nullptr;
  // B: a raw packet QP taking every frame, and an RSS QP over two work queues taking IPv4 first.
  transport::Qp* raw = nullptr;
  transport::Qp* rss = nullptr;
  verbs::Srq* wqs[2] = {};
  std::vector<uint8_t> mem;
  verbs::Mr mr;
  explicit Side(uint32_t ip) : pc(cfg(ip)), mem(kGuard + kArena + kGuard, kCanary) {
    pd = *pc.alloc_pd();
    cq = *pc.create_cq(256);
    qp = *pc.create_qp(pd, QpType::RC, cq, cq, QpCap{32, 32, 2, 2, 32}, true);
    if (ip == kIpA) {
      xqp = *pc.create_qp(pd, QpType::XrcSend, cq, cq, QpCap{32, 0, 2, 2, 32}, true);
      tqp = *pc.create_qp(pd, QpType::RC, cq, cq, QpCap{32, 32, 2, 2, 32}, true);
    } else {
      tsrq = *pc.create_tm_srq(pd, cq, 32, 2, 8, 8);
      tqp = *pc.create_qp(pd, QpType::RC, cq, cq, QpCap{4, 0, 1, 1, 0}, true, tsrq);
      const uint32_t x = *pc.create_xrcd();
      xsrq = *pc.create_xrc_srq(pd, x, cq, 32, 2);
      xqp = *pc.create_xrc_tgt(x);
      raw = *pc.create_qp(pd, QpType::RawPacket, cq, cq, QpCap{4, 32, 1, 2, 0}, true);
      QpAttr at;
      for (QpState st : {QpState::Init, QpState::Rtr, QpState::Rts}) {
        at.qp_state = st;
        (void)pc.modify_qp(*raw, at, kQpState | (st == QpState::Init ? uint32_t(kQpPort) : 0u));
      }
      (void)pc.create_flow(*raw, FlowRule{.priority = 1});
      for (auto& w : wqs) {
        w = *pc.create_wq(pd, cq, 32, 2);
        (void)pc.modify_wq(*w, WqState::Ready);
      }
      const uint64_t fields = kHashSrcIpv4 | kHashDstIpv4 | kHashSrcPortUdp | kHashDstPortUdp;
      rss = *pc.create_rss_qp(pd, {wqs[0], wqs[1]}, RxHash{std::vector<uint8_t>(40, 0x6d), fields});
      FlowRule v4;
      v4.ipv4 = FlowRule::Ipv4{};
      (void)pc.create_flow(*rss, v4);
    }
    std::memset(mem.data() + kGuard, 0, kArena);
    mr = *pc.reg_mr(pd, mem.data() + kGuard, kArena,
                     kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic |
                         kAccessFlushGlobal);
  }
  static transport::CoreConfig cfg(uint32_t ip) {
    transport::CoreConfig c;
    c.gids = {Gid::from_ipv4(ip)};
    c.seed = ip;
    return c;
  }
  uint8_t* arena() { return mem.data() + kGuard; }
  void check_canaries() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (mem[i] != kCanary || mem[kGuard + kArena + i] != kCanary) __builtin_trap();
  }
  void connect(transport::Qp* q, uint32_t peer_qpn, uint32_t peer_ip, uint32_t my_psn, uint32_t peer_psn) {
    ConnectOptions o;
    o.path_mtu = Mtu::Mtu1024;
    o.max_dest_rd_atomic = 4;
    o.min_rnr_timer = 1;
    o.timeout = 4;
    o.retry_cnt = 3;
    o.rnr_retry = 3;
    o.max_rd_atomic = 2;
    Endpoint remote;
    remote.gid = Gid::from_ipv4(peer_ip);
    remote.qpn = peer_qpn;
    remote.psn = peer_psn;
    o.access |= kAccessFlushGlobal;
    (void)transport::connect_rc(pc, *q, remote, my_psn, o);
  }
  void drain() {
    pc.release_tx();
    pc.cq_events().clear();
    Wc wc[64];
    while (cq->poll(wc) > 0) {
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Side a(kIpA), b(kIpB);
  a.connect(a.qp, b.qp->qpn().value(), kIpB, 0xfffff0, 0x100);
  b.connect(b.qp, a.qp->qpn().value(), kIpA, 0x100, 0xfffff0);
  a.connect(a.xqp, b.xqp->qpn().value(), kIpB, 0x200, 0x300);
  b.connect(b.xqp, a.xqp->qpn().value(), kIpA, 0x300, 0x200);
  a.connect(a.tqp, b.tqp->qpn().value(), kIpB, 0x400, 0x500);
  b.connect(b.tqp, a.tqp->qpn().value(), kIpA, 0x500, 0x400);
  // Work outstanding on both sides: the requester has sent, the responder expects.
  Sge s{uint64_t(a.arena()), 3000, a.mr.lkey.value()};
  SendWr w[4] = {{1, WrOpcode::Send, 0, {&s, 1}},
                 {2, WrOpcode::RdmaWrite, 0, {&s, 1}, 0, uint64_t(b.arena()), b.mr.rkey.value()},
                 {3, WrOpcode::RdmaRead, 0, {&s, 1}, 0, uint64_t(b.arena() + 4096), b.mr.rkey.value()},
                 {4, WrOpcode::AtomicFetchAdd, 0, {}, 0, uint64_t(b.arena() + 8), b.mr.rkey.value(), 5}};
  Sge s8{uint64_t(a.arena() + 8000), 8, a.mr.lkey.value()};
  w[3].sg_list = {&s8, 1};
  (void)a.pc.post_send(*a.qp, w);
  Sge r{uint64_t(b.arena() + 9000), 2000, b.mr.lkey.value()};
  RecvWr rw[2] = {{10, {&r, 1}}, {11, {&r, 1}}};
  (void)b.pc.post_recv(*b.qp, rw);
  // The XRC pair: a SEND to the target's SRQ, an ATOMIC WRITE and a FLUSH.
  SendWr xw[3] = {{5, WrOpcode::Send, 0, {&s, 1}}, {6, WrOpcode::AtomicWrite}, {7, WrOpcode::Flush}};
  xw[1].remote_addr = uint64_t(b.arena() + 16);
  xw[2].remote_addr = uint64_t(b.arena());
  xw[2].flush_length = 64;
  for (SendWr& x : xw) {
    x.rkey = b.mr.rkey.value();
    x.remote_srqn = b.xsrq->handle();
  }
  xw[1].compare_add = 0x0102030405060708ull;
  (void)a.pc.post_send(*a.xqp, xw);
  (void)b.pc.post_srq_recv(*b.xsrq, rw);
  // The tag matching pair: tags with a small and a large buffer, ordinary receives, a receive
  // for a FIN at A, and an EAGER SEND under way.
  (void)b.pc.post_srq_recv(*b.tsrq, rw);
  Sge tb[2] = {{uint64_t(b.arena() + 4000), 100, b.mr.lkey.value()}, {uint64_t(b.arena() + 6000), 2000, b.mr.lkey.value()}};
  TmOp tags[2];
  for (int i = 0; i < 2; ++i) {
    tags[i].recv_wr_id = 30 + uint64_t(i);
    tags[i].sg_list = {&tb[i], 1};
    tags[i].tag = uint64_t(i + 1);
    tags[i].mask = 0xff;
  }
  (void)b.pc.post_srq_ops(*b.tsrq, tags);
  Sge fin{uint64_t(a.arena() + 10000), 64, a.mr.lkey.value()};
  RecvWr frecv{12, {&fin, 1}};
  (void)a.pc.post_recv(*a.tqp, {&frecv, 1});
  a.arena()[0] = uint8_t(TmhOp::Eager);
  a.arena()[15] = 2;  // tag 2
  SendWr tw{8, WrOpcode::Send, 0, {&s, 1}};
  (void)a.pc.post_send(*a.tqp, {&tw, 1});
  // Frames (every input chunk is one for B as well): receives that fit and ones that do not.
  Sge fr[2] = {{uint64_t(b.arena() + 12000), 1500, b.mr.lkey.value()}, {uint64_t(b.arena() + 14000), 100, b.mr.lkey.value()}};
  RecvWr frw[2] = {{20, {&fr[0], 1}}, {21, {&fr[1], 1}}};
  for (int i = 0; i < 4; ++i) {
    (void)b.pc.post_recv(*b.raw, frw);
    for (verbs::Srq* w : b.wqs) (void)b.pc.post_srq_recv(*w, frw);
  }
  uint64_t now = 1'000'000;
  a.pc.progress(now);
  b.pc.progress(now);
  a.drain();
  b.drain();

  std::vector<uint8_t> pkt;
  while (size >= 3) {
    uint8_t flags = data[0];
    const bool xrc = data[1] & 0x80, tm = data[1] & 0x40;
    size_t len = size_t(data[1] & 0x3f) << 8 | data[2];
    data += 3;
    size -= 3;
    if (len > size) len = size;
    pkt.assign(data, data + len);
    data += len;
    size -= len;
    Side& to = flags & 1 ? a : b;
    Side& from = flags & 1 ? b : a;
    transport::Qp* q = xrc ? to.xqp : tm ? to.tqp : to.qp;
    if (pkt.size() >= 12) {
      if (flags & 2) wire::write_be24(pkt.data() + 5, q->qpn().value());
      if (flags & 4) {
        wire::Psn base = flags & 1 ? q->comp.una : q->resp.epsn;
        wire::write_be24(pkt.data() + 9, (base + (flags >> 5)).value());
      }
    }
    wire::FlowAddr f{from.pc.config().gids[0], to.pc.config().gids[0], 0xc001, wire::kRoceV2Port};
    if ((flags & 8) && pkt.size() >= 16) {
      size_t body = pkt.size() - 4;
      wire::icrc_store(pkt.data() + body, wire::icrc_for_flow(f, {pkt.data(), body}));
    }
    to.pc.on_packet(pkt, f, now);
    b.pc.on_frame(pkt);  // and as an Ethernet frame from B's interface
    now += (flags & 16) ? 5'000'000 : 1'000;  // sometimes long enough for timers to fire
    a.pc.progress(now);
    b.pc.progress(now);
    a.drain();
    b.drain();
  }
  a.check_canaries();
  b.check_canaries();
  return 0;
}
