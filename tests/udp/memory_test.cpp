// Memory the NIC reaches, through the public API and the real engine: reregistration (access,
// PD and range change, the keys stay), regions at an IOVA, device memory and its zero-based
// regions, memory windows, on-demand regions, CQ resizing, and a reset QP taking its
// completions with it.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "uroce/uroce.hpp"

using namespace uroce;

namespace {

constexpr uint32_t kRemote = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

// Two RC QPs of one device connected to each other; `a` sends, `b` receives. Each has a send
// CQ and a receive CQ of its own, so a test can wait on one while another keeps what it got.
struct Loop {
  std::unique_ptr<Device> dev = std::move(*Device::open("uroce_lo"));
  std::unique_ptr<ProtectionDomain> pd = std::move(*dev->alloc_pd());
  std::unique_ptr<CompletionQueue> a_send = std::move(*dev->create_cq(64)), a_recv = std::move(*dev->create_cq(64)),
                                   b_send = std::move(*dev->create_cq(64)), b_recv = std::move(*dev->create_cq(64));
  std::unique_ptr<QueuePair> a, b;
  uint32_t psn = 100;

  Loop() { connect(); }
  // New QPs (or the same ones again after a reset), connected in RTS.
  void connect(bool fresh = true) {
    if (fresh) {
      a = std::move(*pd->create_qp({QpType::RC, a_send.get(), a_recv.get()}));
      b = std::move(*pd->create_qp({QpType::RC, b_send.get(), b_recv.get()}));
    }
    const Gid gid = *dev->query_gid(0);
    psn += 1000;
    ConnectOptions o;
    o.access = kRemote | kAccessRemoteAtomic;
    ASSERT_TRUE(a->connect({.gid = gid, .qpn = b->qp_num(), .psn = psn + 1}, psn, o));
    ASSERT_TRUE(b->connect({.gid = gid, .qpn = a->qp_num(), .psn = psn}, psn + 1, o));
  }
  void reset() {
    QpAttr r;
    r.qp_state = QpState::Reset;
    ASSERT_TRUE(a->modify(r, kQpState));
    ASSERT_TRUE(b->modify(r, kQpState));
  }
  // One signaled request from `a`; its completion status (Success, or what failed).
  WcStatus post(const SendWr& w) {
    if (!a->post_send(w)) return WcStatus::GeneralErr;
    Wc wc[1];
    auto got = a_send->wait(wc, 10000);
    if (!got || *got != 1) return WcStatus::GeneralErr;
    EXPECT_EQ(wc[0].wr_id, w.wr_id);
    return wc[0].status;
  }
  WcStatus write(const Sge& src, uint64_t va, uint32_t rkey, uint64_t id = 1) {
    SendWr w{id, WrOpcode::RdmaWrite, kSendSignaled, {&src, 1}};
    w.remote_addr = va;
    w.rkey = rkey;
    return post(w);
  }
  WcStatus read(const Sge& dst, uint64_t va, uint32_t rkey, uint64_t id = 2) {
    SendWr w{id, WrOpcode::RdmaRead, kSendSignaled, {&dst, 1}};
    w.remote_addr = va;
    w.rkey = rkey;
    return post(w);
  }
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7);
  return v;
}

}  // namespace

TEST(Memory, ReregChangesAccessRangeAndPdAndKeepsTheKeys) {
  Loop l;
  auto src = pattern(256, 3);
  std::vector<uint8_t> first(4096, 0), second(4096, 0);
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto t = std::move(*l.pd->reg_mr(first.data(), first.size(), kRemote));
  const uint32_t lkey = t->lkey(), rkey = t->rkey();
  ASSERT_EQ(l.write(smr->sge(0, 256), uint64_t(first.data()) + 100, rkey), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(first.data() + 100, src.data(), 256));

  // Access: without REMOTE_WRITE the next WRITE is refused and nothing is written.
  ASSERT_TRUE(t->rereg({.access = kAccessLocalWrite | kAccessRemoteRead}));
  EXPECT_EQ(t->lkey(), lkey);
  EXPECT_EQ(t->rkey(), rkey);
  std::fill(first.begin(), first.end(), 0);
  EXPECT_EQ(l.write(smr->sge(0, 256), uint64_t(first.data()), rkey), WcStatus::RemAccessErr);
  EXPECT_EQ(std::count(first.begin(), first.end(), 0), 4096);
  l.reset();
  l.connect(false);

  // Range: the same rkey now reaches the second buffer and no longer the first.
  ASSERT_TRUE(t->rereg({.addr = second.data(), .length = second.size(), .access = kRemote}));
  EXPECT_EQ(t->addr(), second.data());
  EXPECT_EQ(t->iova(), uint64_t(second.data()));
  EXPECT_EQ(l.write(smr->sge(0, 256), uint64_t(first.data()), rkey), WcStatus::RemAccessErr);
  EXPECT_EQ(std::count(first.begin(), first.end(), 0), 4096);
  l.reset();
  l.connect(false);
  ASSERT_EQ(l.write(smr->sge(0, 256), uint64_t(second.data()) + 3840, rkey), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(second.data() + 3840, src.data(), 256));
  std::vector<uint8_t> back(256, 0);
  auto bmr = std::move(*l.pd->reg_mr(back.data(), back.size(), kAccessLocalWrite));
  ASSERT_EQ(l.read(bmr->sge(0, 256), uint64_t(second.data()) + 3840, rkey), WcStatus::Success);
  EXPECT_EQ(back, std::vector<uint8_t>(src.begin(), src.end()));

  // PD: the source region moved to another PD is no longer the sending QP's.
  auto pd2 = std::move(*l.dev->alloc_pd());
  EXPECT_FALSE(pd2->busy());
  ASSERT_TRUE(smr->rereg({.pd = pd2.get()}));
  EXPECT_TRUE(pd2->busy());
  EXPECT_EQ(l.write(smr->sge(0, 256), uint64_t(second.data()), rkey), WcStatus::LocProtErr);
  l.reset();
  l.connect(false);
  ASSERT_TRUE(smr->rereg({.pd = l.pd.get()}));
  EXPECT_FALSE(pd2->busy());
  ASSERT_EQ(l.write(smr->sge(0, 256), uint64_t(second.data()), rkey), WcStatus::Success);

  // Bad changes are refused whole: the region works as before.
  auto other = std::move(*Device::open("uroce_lo"));
  auto foreign = std::move(*other->alloc_pd());
  for (const MrChange& bad : {MrChange{}, MrChange{.pd = foreign.get()}, MrChange{.access = kAccessRemoteWrite},
                              MrChange{.addr = first.data()}, MrChange{.length = 64}}) {
    Status s = t->rereg(bad);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, EINVAL) << s.error().message;
  }
  EXPECT_EQ(t->addr(), second.data());
  ASSERT_EQ(l.write(smr->sge(0, 256), uint64_t(second.data()) + 1000, rkey), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(second.data() + 1000, src.data(), 256));
}

TEST(Memory, ARegionAtAnIovaIsNamedByIt) {
  Loop l;
  auto src = pattern(512, 9);
  std::vector<uint8_t> dst(8192, 0);
  constexpr uint64_t kIova = 0x5000'0000'0000;  // nowhere near the heap
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kIova, kAccessLocalWrite));
  auto dmr = std::move(*l.pd->reg_mr(dst.data(), dst.size(), 0, kRemote));
  EXPECT_EQ(smr->sge(16, 8).addr, kIova + 16);
  ASSERT_EQ(l.write(smr->sge(0, 512), 4096, dmr->rkey()), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(dst.data() + 4096, src.data(), 512));
  EXPECT_EQ(std::count(dst.begin(), dst.begin() + 4096, 0), 4096);
  // Its host address is not its name: out of bounds, nothing written.
  EXPECT_EQ(l.write(smr->sge(0, 512), uint64_t(dst.data()), dmr->rkey()), WcStatus::RemAccessErr);
  l.reset();
  l.connect(false);
  Sge host_named{uint64_t(src.data()), 512, smr->lkey()};
  EXPECT_EQ(l.write(host_named, 0, dmr->rkey()), WcStatus::LocProtErr);
  EXPECT_EQ(std::count(dst.begin(), dst.begin() + 4096, 0), 4096);
}

TEST(Memory, DeviceMemoryCarriesRdmaThroughAZeroBasedRegion) {
  Loop l;
  const uint64_t max = l.dev->query_device().max_dm_size;
  ASSERT_GE(max, 8192u);
  auto dm = std::move(*l.dev->alloc_dm(4096));
  EXPECT_EQ(dm->length(), 4096u);
  std::vector<uint8_t> out(4096, 0xff);
  ASSERT_TRUE(dm->copy_from(out.data(), 0, 4096));
  EXPECT_EQ(std::count(out.begin(), out.end(), 0), 4096) << "device memory starts zeroed";

  // Copies: whole words at word offsets, within the memory.
  auto words = pattern(64, 1);
  ASSERT_TRUE(dm->copy_to(8, words.data(), 64));
  ASSERT_TRUE(dm->copy_from(out.data(), 8, 64));
  EXPECT_EQ(0, std::memcmp(out.data(), words.data(), 64));
  for (auto [off, len] : {std::pair<uint64_t, size_t>{1, 4}, {4, 3}, {4096, 4}, {0, 4100}, {~0ull - 3, 8}}) {
    Status s = dm->copy_to(off, words.data(), len);
    ASSERT_FALSE(s) << off << "+" << len;
    EXPECT_EQ(s.error().code, EINVAL);
    EXPECT_FALSE(dm->copy_from(out.data(), off, len));
  }

  // A region on [1024, 3072): named 0 .. 2048 by the peer and by local SGEs.
  EXPECT_EQ(l.pd->reg_dm_mr(*dm, 2048, 4096, kRemote).error().code, EINVAL);
  auto mr = std::move(*l.pd->reg_dm_mr(*dm, 1024, 2048, kRemote));
  EXPECT_EQ(mr->iova(), 0u);
  EXPECT_TRUE(dm->busy());
  auto src = pattern(1000, 5);
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  ASSERT_EQ(l.write(smr->sge(0, 1000), 48, mr->rkey()), WcStatus::Success);
  ASSERT_TRUE(dm->copy_from(out.data(), 1024 + 48, 1000));
  EXPECT_EQ(0, std::memcmp(out.data(), src.data(), 1000));
  std::vector<uint8_t> back(1000, 0);
  auto bmr = std::move(*l.pd->reg_mr(back.data(), back.size(), kAccessLocalWrite));
  ASSERT_EQ(l.read(bmr->sge(0, 1000), 48, mr->rkey()), WcStatus::Success);
  EXPECT_EQ(back, src);
  // A local SGE on it: a SEND from device memory.
  std::vector<uint8_t> got(1000, 0);
  auto gmr = std::move(*l.pd->reg_mr(got.data(), got.size(), kAccessLocalWrite));
  Sge r = gmr->sge(0, 1000), s = mr->sge(48, 1000);
  ASSERT_TRUE(l.b->post_recv({7, {&r, 1}}));
  ASSERT_EQ(l.post({8, WrOpcode::Send, kSendSignaled, {&s, 1}}), WcStatus::Success);
  EXPECT_EQ(got, src);
  // Past the region's 2048 bytes (still inside the device memory): refused, nothing written.
  std::vector<uint8_t> before(4096), after(4096);
  ASSERT_TRUE(dm->copy_from(before.data(), 0, 4096));
  EXPECT_EQ(l.write(smr->sge(0, 8), 2044, mr->rkey()), WcStatus::RemAccessErr);
  ASSERT_TRUE(dm->copy_from(after.data(), 0, 4096));
  EXPECT_EQ(before, after);
  EXPECT_EQ(mr->rereg({.access = kAccessLocalWrite}).error().code, EINVAL);

  // The device holds max_dm_size in all; freeing gives it back. The memory outlives its
  // handle while a region lies on it.
  auto big = l.dev->alloc_dm(max - 4096 + 4);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ENOMEM);
  EXPECT_EQ(l.dev->alloc_dm(0).error().code, EINVAL);
  dm.reset();
  EXPECT_FALSE(l.dev->alloc_dm(max - 4096 + 4)) << "freed while a region still lies on it";
  l.reset();
  l.connect(false);
  ASSERT_EQ(l.read(bmr->sge(0, 1000), 48, mr->rkey()), WcStatus::Success);
  EXPECT_EQ(back, src);
  mr.reset();
  EXPECT_TRUE(l.dev->alloc_dm(max));
}

TEST(Memory, ResizingACqKeepsWhatWaits) {
  Loop l;
  auto src = pattern(64, 2);
  std::vector<uint8_t> dst(64 * 8, 0);
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto dmr = std::move(*l.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite));
  auto rcq = std::move(*l.dev->create_cq(4));
  auto b = std::move(*l.pd->create_qp({QpType::RC, l.b_send.get(), rcq.get()}));
  l.b = std::move(b);
  l.reset();
  l.connect(false);
  // Three receives complete into rcq; the sender's completions say when (the responder
  // completes a receive before it acknowledges the SEND).
  for (uint64_t i = 0; i < 3; ++i) {
    Sge r = dmr->sge(i * 64, 64);
    ASSERT_TRUE(l.b->post_recv({100 + i, {&r, 1}}));
  }
  for (uint64_t i = 0; i < 3; ++i) {
    Sge s = smr->sge(0, 64);
    ASSERT_EQ(l.post({i, WrOpcode::Send, kSendSignaled, {&s, 1}}), WcStatus::Success);
  }
  for (uint32_t bad : {0u, 2u, l.dev->query_device().max_cqe + 1}) {
    Status s = rcq->resize(bad);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().code, EINVAL);
  }
  EXPECT_EQ(rcq->capacity(), 4u);
  ASSERT_TRUE(rcq->resize(100));
  EXPECT_GE(rcq->capacity(), 100u);
  ASSERT_TRUE(rcq->resize(3));
  EXPECT_GE(rcq->capacity(), 3u);
  EXPECT_LT(rcq->capacity(), 100u);
  Wc wc[8];
  ASSERT_EQ(rcq->poll(wc), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(wc[i].wr_id, 100u + i);
    EXPECT_EQ(wc[i].status, WcStatus::Success);
    EXPECT_EQ(wc[i].byte_len, 64u);
  }
  EXPECT_EQ(0, std::memcmp(dst.data() + 128, src.data(), 64));
}

TEST(Memory, AResetQpTakesItsCompletionsWithIt) {
  Loop l;
  // A second pair whose receiver shares b's receive CQ.
  auto c = std::move(*l.pd->create_qp({QpType::RC, l.a_send.get(), l.a_recv.get()}));
  auto d = std::move(*l.pd->create_qp({QpType::RC, l.b_send.get(), l.b_recv.get()}));
  const Gid gid = *l.dev->query_gid(0);
  ASSERT_TRUE(c->connect({.gid = gid, .qpn = d->qp_num(), .psn = 5}, 6));
  ASSERT_TRUE(d->connect({.gid = gid, .qpn = c->qp_num(), .psn = 6}, 5));
  std::vector<uint8_t> buf(1024, 1);
  auto mr = std::move(*l.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite));
  Sge r = mr->sge(512, 16), s = mr->sge(0, 16);
  ASSERT_TRUE(l.b->post_recv({1, {&r, 1}}));
  ASSERT_TRUE(d->post_recv({2, {&r, 1}}));
  ASSERT_TRUE(l.b->post_recv({3, {&r, 1}}));  // flushed by the reset's way through ERR
  ASSERT_EQ(l.post({10, WrOpcode::Send, kSendSignaled, {&s, 1}}), WcStatus::Success);
  ASSERT_TRUE(c->post_send({11, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  Wc wc[4];
  auto got = l.a_send->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  ASSERT_EQ(wc[0].wr_id, 11u);
  QpAttr e;
  e.qp_state = QpState::Err;
  ASSERT_TRUE(l.b->modify(e, kQpState));
  QpAttr reset;
  reset.qp_state = QpState::Reset;
  ASSERT_TRUE(l.b->modify(reset, kQpState));
  // b's receive and its flushed one are gone; d's stays.
  ASSERT_EQ(l.b_recv->poll(wc), 1);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].qp_num, d->qp_num());
  EXPECT_EQ(l.b_recv->poll(wc), 0);
}

// Memory windows through the API and the engine: a type 2 window serves the QP that bound it
// and no other QP of its PD; a peer's SEND with invalidate and our LOCAL_INV end it; a bind
// the region cannot back fails with MW_BIND_ERR and binds nothing.
TEST(Memory, WindowsServeTheirQpAloneAndEndWhenInvalidated) {
  Loop l;
  std::vector<uint8_t> mem(8192, 0), src = pattern(256, 4), rbuf(64, 0);
  auto mr = std::move(*l.pd->reg_mr(mem.data(), mem.size(), kAccessLocalWrite | kAccessMwBind));
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto rmr = std::move(*l.pd->reg_mr(rbuf.data(), rbuf.size(), kAccessLocalWrite));
  auto w = std::move(*l.pd->alloc_mw(2));
  EXPECT_EQ(w->type(), 2);
  EXPECT_FALSE(w->bound());
  auto bind = [&](QueuePair& qp, CompletionQueue& cq, uint32_t rkey, uint64_t off, uint64_t len, uint32_t access) {
    MwBind b{w->handle(), rkey, mr->lkey(), uint64_t(mem.data()) + off, len, access};
    SendWr s{50, WrOpcode::BindMw, kSendSignaled, {}};
    s.bind = &b;
    if (!qp.post_send(s)) return WcStatus::GeneralErr;
    Wc wc[1];
    auto got = cq.wait(wc, 10000);
    if (!got || *got != 1) return WcStatus::GeneralErr;
    EXPECT_EQ(wc[0].opcode, WcOpcode::BindMw);
    return wc[0].status;
  };
  const uint32_t k1 = w->next_rkey();
  ASSERT_EQ(bind(*l.b, *l.b_send, k1, 4096, 2048, kAccessRemoteWrite | kAccessRemoteRead), WcStatus::Success);
  EXPECT_TRUE(w->bound());
  EXPECT_EQ(w->rkey(), k1);
  EXPECT_EQ(mr->windows(), 1u);
  ASSERT_EQ(l.write(smr->sge(0, 256), uint64_t(mem.data()) + 4096 + 100, k1), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(mem.data() + 4096 + 100, src.data(), 256));

  // Another QP of the same PD may not use it.
  auto c = std::move(*l.pd->create_qp({QpType::RC, l.a_send.get(), l.a_recv.get()}));
  auto d = std::move(*l.pd->create_qp({QpType::RC, l.b_send.get(), l.b_recv.get()}));
  const Gid gid = *l.dev->query_gid(0);
  ASSERT_TRUE(c->connect({.gid = gid, .qpn = d->qp_num(), .psn = 31}, 32));
  ASSERT_TRUE(d->connect({.gid = gid, .qpn = c->qp_num(), .psn = 32}, 31));
  std::fill(mem.begin(), mem.end(), 0);
  Sge s = smr->sge(0, 256);
  SendWr wr{60, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  wr.remote_addr = uint64_t(mem.data()) + 4096;
  wr.rkey = k1;
  ASSERT_TRUE(c->post_send(wr));
  Wc wc[2];
  auto got = l.a_send->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].wr_id, 60u);
  EXPECT_EQ(wc[0].status, WcStatus::RemAccessErr);
  EXPECT_EQ(std::count(mem.begin(), mem.end(), 0), 8192);

  // The peer's SEND with invalidate ends it: the receive names the rkey.
  Sge r = rmr->sge(0, 64), s8 = smr->sge(0, 8);
  ASSERT_TRUE(l.b->post_recv({61, {&r, 1}}));
  SendWr inv{62, WrOpcode::SendWithInv, kSendSignaled, {&s8, 1}};
  inv.invalidate_rkey = k1;
  ASSERT_EQ(l.post(inv), WcStatus::Success);
  got = l.b_recv->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].wr_id, 61u);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_TRUE(wc[0].with_inv);
  EXPECT_EQ(wc[0].invalidated_rkey, k1);
  EXPECT_FALSE(w->bound());
  EXPECT_EQ(mr->windows(), 0u);
  EXPECT_EQ(l.write(smr->sge(0, 256), uint64_t(mem.data()) + 4096, k1), WcStatus::RemAccessErr);
  EXPECT_EQ(std::count(mem.begin(), mem.end(), 0), 8192);
  l.reset();
  l.connect(false);

  // Bound again with the next rkey; our LOCAL_INV ends it, and a SEND with invalidate naming
  // it after that is refused (the receive completes in error, counted).
  const uint32_t k2 = w->next_rkey();
  ASSERT_NE(k2, k1);
  ASSERT_EQ(bind(*l.b, *l.b_send, k2, 0, 1024, kAccessRemoteRead), WcStatus::Success);
  SendWr li{63, WrOpcode::LocalInv, kSendSignaled, {}};
  li.invalidate_rkey = k2;
  ASSERT_TRUE(l.b->post_send(li));
  got = l.b_send->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].opcode, WcOpcode::LocalInv);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  const uint64_t bad_before = l.dev->counters()["rx_bad_invalidate"];
  ASSERT_TRUE(l.b->post_recv({64, {&r, 1}}));
  inv.invalidate_rkey = k2;
  EXPECT_EQ(l.post(inv), WcStatus::RemInvReqErr);
  got = l.b_recv->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].status, WcStatus::RemInvReqErr);
  EXPECT_EQ(l.dev->counters()["rx_bad_invalidate"], bad_before + 1);
  l.reset();
  l.connect(false);

  // Binds the region cannot back: MW_BIND_ERR, nothing bound.
  auto plain = std::move(*l.pd->reg_mr(mem.data(), mem.size(), kAccessLocalWrite));
  MwBind no_bind{w->handle(), w->next_rkey(), plain->lkey(), uint64_t(mem.data()), 64, kAccessRemoteRead};
  SendWr bw{70, WrOpcode::BindMw, kSendSignaled, {}};
  bw.bind = &no_bind;
  ASSERT_TRUE(l.b->post_send(bw));
  got = l.b_send->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].status, WcStatus::MwBindErr);
  EXPECT_FALSE(w->bound());
  l.reset();
  l.connect(false);
  EXPECT_EQ(bind(*l.b, *l.b_send, w->next_rkey(), 8192 - 64, 128, kAccessRemoteRead), WcStatus::MwBindErr)
      << "a window past its region";
  EXPECT_FALSE(w->bound());

  // Posting checks.
  Sge one = smr->sge(0, 8);
  SendWr with_data{80, WrOpcode::BindMw, kSendSignaled, {&one, 1}};
  with_data.bind = &no_bind;
  EXPECT_EQ(l.a->post_send(with_data).error().code, EINVAL);
  SendWr no_info{81, WrOpcode::BindMw, kSendSignaled, {}};
  EXPECT_EQ(l.a->post_send(no_info).error().code, EINVAL);
  auto uc = std::move(*l.pd->create_qp({QpType::UC, l.a_send.get(), l.a_recv.get()}));
  auto uc_peer = std::move(*l.pd->create_qp({QpType::UC, l.b_send.get(), l.b_recv.get()}));
  ASSERT_TRUE(uc->connect({.gid = gid, .qpn = uc_peer->qp_num(), .psn = 1}, 2));
  EXPECT_EQ(uc->post_send(inv).error().code, EINVAL) << "SEND with invalidate is RC's";
  EXPECT_EQ(l.pd->alloc_mw(3).error().code, EINVAL);
}

// Destroying a region unbinds the windows bound to it: their rkeys stop working at once.
TEST(Memory, ARegionTakesItsWindowsWithIt) {
  Loop l;
  std::vector<uint8_t> mem(4096, 0), src = pattern(64, 8);
  auto mr = std::move(*l.pd->reg_mr(mem.data(), mem.size(), kAccessLocalWrite | kAccessMwBind));
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto w = std::move(*l.pd->alloc_mw(1));
  const uint32_t k = w->next_rkey();
  MwBind b{w->handle(), k, mr->lkey(), uint64_t(mem.data()), 4096, kAccessRemoteWrite};
  SendWr s{1, WrOpcode::BindMw, kSendSignaled, {}};
  s.bind = &b;
  ASSERT_EQ(l.post(s), WcStatus::Success);
  ASSERT_EQ(l.write(smr->sge(0, 64), uint64_t(mem.data()), k), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(mem.data(), src.data(), 64));
  EXPECT_EQ(mr->rereg({.access = kAccessLocalWrite}).error().code, EBUSY);
  mr.reset();
  EXPECT_FALSE(w->bound());
  std::fill(mem.begin(), mem.end(), 0);
  EXPECT_EQ(l.write(smr->sge(0, 64), uint64_t(mem.data()), k), WcStatus::RemAccessErr);
  EXPECT_EQ(std::count(mem.begin(), mem.end(), 0), 4096);
}

// On-demand paging: nothing of the region need be mapped. What is mapped is reached as in any
// region; a page that is not (unmapped, or read-only for a write) fails the access with an
// access error, and the process lives on.
TEST(Memory, OnDemandRegionsFailCleanlyWhereNothingIsMapped) {
  Loop l;
  constexpr size_t kPage = 4096;
  auto* m = static_cast<uint8_t*>(mmap(nullptr, 3 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  auto odp = std::move(*l.pd->reg_mr(m, 3 * kPage, kRemote | kAccessRemoteAtomic | kAccessOnDemand));
  auto src = pattern(512, 6);
  std::vector<uint8_t> back(512, 0);
  uint64_t word = 0;
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto bmr = std::move(*l.pd->reg_mr(back.data(), back.size(), kAccessLocalWrite));
  auto wmr = std::move(*l.pd->reg_mr(&word, 8, kAccessLocalWrite));
  auto again = [&] {
    l.reset();
    l.connect(false);
  };
  auto fetch_add = [&](uint64_t va, uint64_t add) {
    Sge s = wmr->sge(0, 8);
    SendWr w{9, WrOpcode::AtomicFetchAdd, kSendSignaled, {&s, 1}};
    w.remote_addr = va;
    w.rkey = odp->rkey();
    w.compare_add = add;
    return l.post(w);
  };
  const uint64_t p1 = uint64_t(m) + kPage, p2 = uint64_t(m) + 2 * kPage;
  ASSERT_EQ(l.write(smr->sge(0, 512), p1 + 100, odp->rkey()), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(m + kPage + 100, src.data(), 512));
  ASSERT_EQ(l.read(bmr->sge(0, 512), p1 + 100, odp->rkey()), WcStatus::Success);
  EXPECT_EQ(back, src);
  ASSERT_EQ(fetch_add(p2, 5), WcStatus::Success);
  ASSERT_EQ(fetch_add(p2, 5), WcStatus::Success);
  EXPECT_EQ(word, 5u);
  auto prefetch = [&](uint64_t addr, uint32_t len, uint32_t lkey) {
    Sge s{addr, len, lkey};
    return l.pd->prefetch({&s, 1});
  };
  EXPECT_TRUE(prefetch(p1, 4096, odp->lkey()));
  EXPECT_EQ(prefetch(uint64_t(src.data()), 8, smr->lkey()).error().code, EINVAL) << "not on demand";

  // Page 1 unreachable (PROT_NONE): WRITE, READ, atomic and a local SGE on it all fail.
  ASSERT_EQ(mprotect(m + kPage, kPage, PROT_NONE), 0);
  EXPECT_EQ(prefetch(p1, 8, odp->lkey()).error().code, EFAULT);
  EXPECT_EQ(l.write(smr->sge(0, 512), p1, odp->rkey()), WcStatus::RemAccessErr);
  again();
  EXPECT_EQ(l.read(bmr->sge(0, 512), p1, odp->rkey()), WcStatus::RemAccessErr);
  again();
  EXPECT_EQ(fetch_add(p1, 1), WcStatus::RemAccessErr);
  again();
  Sge local{p1, 64, odp->lkey()};
  EXPECT_EQ(l.write(local, uint64_t(back.data()), bmr->rkey()), WcStatus::LocProtErr);
  again();
  // Page 2 read-only: READ works, WRITE does not, and writes nothing.
  ASSERT_EQ(mprotect(m + 2 * kPage, kPage, PROT_READ), 0);
  ASSERT_EQ(l.read(bmr->sge(0, 8), p2, odp->rkey()), WcStatus::Success);
  EXPECT_EQ(l.write(smr->sge(0, 8), p2, odp->rkey()), WcStatus::RemAccessErr);
  again();
  uint64_t after = 0;
  std::memcpy(&after, m + 2 * kPage, 8);
  EXPECT_EQ(after, 10u);
  // Mapped again: reached again.
  ASSERT_EQ(mprotect(m + kPage, kPage, PROT_READ | PROT_WRITE), 0);
  ASSERT_EQ(l.write(smr->sge(0, 512), p1, odp->rkey()), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(m + kPage, src.data(), 512));
  // Unmapped altogether.
  ASSERT_EQ(munmap(m, 3 * kPage), 0);
  EXPECT_EQ(l.write(smr->sge(0, 512), p1, odp->rkey()), WcStatus::RemAccessErr);
}

// An implicit on-demand region covers the whole address space from 0: its rkey reaches any
// mapped memory of the process by its address, and nothing else.
TEST(Memory, AnImplicitRegionReachesWhatIsMapped) {
  Loop l;
  auto all = l.pd->reg_mr(nullptr, SIZE_MAX, kRemote | kAccessOnDemand);
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(l.pd->reg_mr(nullptr, SIZE_MAX, kRemote).error().code, EINVAL) << "only on demand";
  auto src = pattern(300, 2);
  std::vector<uint8_t> dst(1000, 0);
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  ASSERT_EQ(l.write(smr->sge(0, 300), uint64_t(dst.data()) + 500, (*all)->rkey()), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(dst.data() + 500, src.data(), 300));
  EXPECT_EQ(l.write(smr->sge(0, 300), 4096, (*all)->rkey()), WcStatus::RemAccessErr) << "page 1 is never mapped";
}

// Pages of an on-demand region taken away and given back while WRITEs and READs run: each
// completes whole or with an access error, and the process lives on.
TEST(Memory, PagesComingAndGoingDuringTrafficNeverCrash) {
  Loop l;
  constexpr size_t kLen = 64 * 1024;
  auto* m = static_cast<uint8_t*>(mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  auto odp = std::move(*l.pd->reg_mr(m, kLen, kRemote | kAccessOnDemand));
  auto src = pattern(kLen, 1);
  std::vector<uint8_t> back(kLen);
  auto smr = std::move(*l.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto bmr = std::move(*l.pd->reg_mr(back.data(), back.size(), kAccessLocalWrite));
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    for (int i = 0; i < 100000 && !stop.load(); ++i)
      mprotect(m + (i % 16) * 4096, 4096, i % 2 ? PROT_READ | PROT_WRITE : PROT_NONE);
    mprotect(m, kLen, PROT_READ | PROT_WRITE);
  });
  int ok = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    const WcStatus st = i % 2 ? l.read(bmr->sge(0, kLen), uint64_t(m), odp->rkey())
                              : l.write(smr->sge(0, kLen), uint64_t(m), odp->rkey());
    ASSERT_TRUE(st == WcStatus::Success || st == WcStatus::RemAccessErr) << to_string(st);
    if (st == WcStatus::Success) {
      ++ok;
    } else {
      ++refused;
      l.reset();
      l.connect(false);
    }
  }
  stop = true;
  flipper.join();
  std::printf("300 transfers of 64 KiB while pages came and went: %d whole, %d refused\n", ok, refused);
  // All mapped again: both ways whole.
  l.reset();
  l.connect(false);
  ASSERT_EQ(l.write(smr->sge(0, kLen), uint64_t(m), odp->rkey()), WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(m, src.data(), kLen));
  ASSERT_EQ(l.read(bmr->sge(0, kLen), uint64_t(m), odp->rkey()), WcStatus::Success);
  EXPECT_EQ(back, src);
  munmap(m, kLen);
}
