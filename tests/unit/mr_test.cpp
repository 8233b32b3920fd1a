#include <gtest/gtest.h>

#include <set>

#include "verbs/mr.hpp"

using namespace uroce;
using namespace uroce::verbs;

TEST(MrTable, ChecksPdBoundsAndAccess) {
  MrTable t(42);
  alignas(8) static uint8_t buf[4096];
  auto mr = t.reg(PdHandle(1), uint64_t(buf), 4096, kAccessLocalWrite | kAccessRemoteRead);
  ASSERT_TRUE(mr.ok());
  uint64_t a = uint64_t(buf);
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), a, 4096, kAccessLocalWrite), KeyCheck::Ok);
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(2), a, 1, 0), KeyCheck::WrongPd);
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), a + 4095, 2, 0), KeyCheck::OutOfBounds);
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), a - 1, 1, 0), KeyCheck::OutOfBounds);
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), a, UINT64_MAX, 0), KeyCheck::OutOfBounds);  // wraps
  EXPECT_EQ(t.check_local(Lkey(mr->rkey.value()), PdHandle(1), a, 1, 0), KeyCheck::BadKey);  // an rkey is no lkey
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), a, 0, 0), KeyCheck::Ok);     // zero length touches nothing
  uint8_t* host = nullptr;
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(1), a + 10, 10, kAccessRemoteRead, &host), KeyCheck::Ok);
  EXPECT_EQ(host, buf + 10);
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(1), a, 10, kAccessRemoteWrite, nullptr), KeyCheck::NoAccess);
  EXPECT_EQ(t.check_remote(Rkey(mr->lkey.value()), PdHandle(1), a, 10, kAccessRemoteRead, nullptr), KeyCheck::BadKey);
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(3), a, 10, kAccessRemoteRead, nullptr), KeyCheck::WrongPd);
  EXPECT_EQ(t.check_remote(Rkey(mr->rkey.value() ^ 1), PdHandle(1), a, 10, kAccessRemoteRead, nullptr), KeyCheck::BadKey);
  EXPECT_TRUE(t.dereg(mr->lkey));
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(1), a, 10, kAccessRemoteRead, nullptr), KeyCheck::BadKey);
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), a, 10, 0), KeyCheck::BadKey);
  EXPECT_FALSE(t.dereg(mr->lkey));
}

TEST(MrTable, RejectsBadRegistrations) {
  MrTable t(1);
  static uint8_t buf[64];
  auto r = t.reg(PdHandle(1), uint64_t(buf), 64, kAccessRemoteWrite);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_NE(r.error().message.find("LOCAL_WRITE"), std::string::npos);
  EXPECT_FALSE(t.reg(PdHandle(1), uint64_t(buf), 64, 0x1000).ok());
  EXPECT_FALSE(t.reg(PdHandle(1), 0, 64, 0).ok());
  EXPECT_FALSE(t.reg(PdHandle(1), UINT64_MAX - 10, 64, 0).ok());
}

TEST(MrTable, KeysAreRandomAndDistinct) {
  MrTable t(7);
  static uint8_t buf[64];
  std::set<uint32_t> keys;
  uint32_t prev = 0;
  int sequential = 0;
  for (int i = 0; i < 1000; ++i) {
    auto mr = t.reg(PdHandle(1), uint64_t(buf), 64, 0);
    ASSERT_TRUE(mr.ok());
    keys.insert(mr->lkey.value());
    keys.insert(mr->rkey.value());
    sequential += (mr->lkey.value() - prev) < 16;
    prev = mr->rkey.value();
  }
  EXPECT_EQ(keys.size(), 2000u);
  EXPECT_LT(sequential, 5);  // one key says nothing about the next
}

TEST(MrTable, AnIovaNamesTheRegionAndHostSaysWhereItLies) {
  MrTable t(3);
  alignas(8) static uint8_t buf[256];
  auto mr = t.reg(PdHandle(1), uint64_t(buf), 256, kAccessLocalWrite | kAccessRemoteWrite, 0);
  ASSERT_TRUE(mr.ok());
  uint8_t* host = nullptr;
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), 16, 16, kAccessLocalWrite, &host), KeyCheck::Ok);
  EXPECT_EQ(host, buf + 16);
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(1), 255, 1, kAccessRemoteWrite, &host), KeyCheck::Ok);
  EXPECT_EQ(host, buf + 255);
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(1), 255, 2, kAccessRemoteWrite, &host), KeyCheck::OutOfBounds);
  EXPECT_EQ(t.check_local(mr->lkey, PdHandle(1), uint64_t(buf), 1, 0, &host), KeyCheck::OutOfBounds);
  EXPECT_FALSE(t.reg(PdHandle(1), uint64_t(buf), 256, 0, UINT64_MAX - 10).ok());  // the IOVA range wraps
}

TEST(MrTable, ReregKeepsTheKeysAndChecksOnlyTheNewRegion) {
  MrTable t(4);
  alignas(8) static uint8_t a[64], b[128];
  auto mr = t.reg(PdHandle(1), uint64_t(a), 64, kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok());
  auto r = t.rereg(mr->lkey, PdHandle(2), uint64_t(b), 128, kAccessLocalWrite | kAccessRemoteRead, uint64_t(b));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lkey, mr->lkey);
  EXPECT_EQ(r->rkey, mr->rkey);
  uint8_t* host = nullptr;
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(2), uint64_t(b) + 100, 28, kAccessRemoteRead, &host), KeyCheck::Ok);
  EXPECT_EQ(host, b + 100);
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(2), uint64_t(a), 8, kAccessRemoteRead, nullptr), KeyCheck::OutOfBounds);
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(1), uint64_t(b), 8, kAccessRemoteRead, nullptr), KeyCheck::WrongPd);
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(2), uint64_t(b), 8, kAccessRemoteWrite, nullptr), KeyCheck::NoAccess);
  // A bad reregistration changes nothing.
  EXPECT_FALSE(t.rereg(mr->lkey, PdHandle(1), uint64_t(a), 64, kAccessRemoteWrite, uint64_t(a)).ok());
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(2), uint64_t(b), 8, kAccessRemoteRead, nullptr), KeyCheck::Ok);
  EXPECT_FALSE(t.rereg(Lkey(mr->lkey.value() ^ 1), PdHandle(1), uint64_t(a), 64, 0, uint64_t(a)).ok());
}

TEST(MrTable, AWindowGrantsItsRangeAndRightsAloneUntilUnbound) {
  MrTable t(5);
  alignas(8) static uint8_t buf[4096];
  const uint64_t a = uint64_t(buf);
  auto mr = t.reg(PdHandle(1), a, 4096, kAccessLocalWrite | kAccessMwBind);
  auto plain = t.reg(PdHandle(1), a, 4096, kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok() && plain.ok());
  auto w = t.alloc_mw(PdHandle(1), 2);
  ASSERT_TRUE(w.ok());
  const uint32_t idx = w->index(), k = (w->rkey.value() & ~0xffu) | ((w->rkey.value() + 1) & 0xffu);
  // Binding refuses, changing nothing: another index, a region without MW_BIND, past the
  // region, write rights the region cannot back, another PD.
  auto ro = t.reg(PdHandle(1), a, 4096, kAccessMwBind);
  for (const MwBind& bad : {MwBind{idx, k ^ 0x100u, mr->lkey.value(), a, 64, kAccessRemoteRead},
                            MwBind{idx, k, plain->lkey.value(), a, 64, kAccessRemoteRead},
                            MwBind{idx, k, mr->lkey.value(), a + 4000, 200, kAccessRemoteRead},
                            MwBind{idx, k, ro->lkey.value(), a, 64, kAccessRemoteWrite}})
    EXPECT_EQ(t.bind_mw(PdHandle(1), 9, bad), WcStatus::MwBindErr);
  EXPECT_EQ(t.bind_mw(PdHandle(2), 9, {idx, k, mr->lkey.value(), a, 64, kAccessRemoteRead}), WcStatus::MwBindErr);
  EXPECT_FALSE(t.mw(idx)->bound);
  ASSERT_EQ(t.bind_mw(PdHandle(1), 9, {idx, k, mr->lkey.value(), a + 1024, 1024, kAccessRemoteWrite}), WcStatus::Success);
  EXPECT_EQ(t.bind_mw(PdHandle(1), 9, {idx, k, mr->lkey.value(), a, 64, kAccessRemoteWrite}), WcStatus::MwBindErr)
      << "a bound type 2 window binds again";
  uint8_t* host = nullptr;
  EXPECT_EQ(t.check_remote(Rkey(k), PdHandle(1), a + 1024, 1024, kAccessRemoteWrite, &host, 9), KeyCheck::Ok);
  EXPECT_EQ(host, buf + 1024);
  EXPECT_EQ(t.check_remote(Rkey(k), PdHandle(1), a + 1024, 1025, kAccessRemoteWrite, nullptr, 9), KeyCheck::OutOfBounds);
  EXPECT_EQ(t.check_remote(Rkey(k), PdHandle(1), a + 1024, 8, kAccessRemoteRead, nullptr, 9), KeyCheck::NoAccess);
  EXPECT_EQ(t.check_remote(Rkey(k), PdHandle(1), a + 1024, 8, kAccessRemoteWrite, nullptr, 10), KeyCheck::WrongPd)
      << "a type 2 window from another QP";
  EXPECT_EQ(t.check_remote(w->rkey, PdHandle(1), a + 1024, 8, kAccessRemoteWrite, nullptr, 9), KeyCheck::BadKey)
      << "the rkey before the bind";
  EXPECT_EQ(t.check_remote(mr->rkey, PdHandle(1), a, 8, kAccessRemoteWrite, nullptr, 9), KeyCheck::NoAccess)
      << "the region itself grants nothing remote";
  // Invalidation: only of a bound type 2 window, from its own QP and PD; a region's rkey is
  // never taken for one.
  EXPECT_FALSE(t.invalidate(plain->rkey, PdHandle(1), 9));
  EXPECT_EQ(t.check_remote(plain->rkey, PdHandle(1), a, 8, kAccessRemoteWrite, nullptr, 9), KeyCheck::Ok);
  EXPECT_FALSE(t.invalidate(Rkey(k), PdHandle(1), 10));
  EXPECT_FALSE(t.invalidate(Rkey(k), PdHandle(2), 9));
  EXPECT_EQ(t.windows_on(mr->lkey), 1u);
  EXPECT_TRUE(t.invalidate(Rkey(k), PdHandle(1), 9));
  EXPECT_EQ(t.windows_on(mr->lkey), 0u);
  EXPECT_EQ(t.check_remote(Rkey(k), PdHandle(1), a + 1024, 8, kAccessRemoteWrite, nullptr, 9), KeyCheck::BadKey);
  EXPECT_FALSE(t.invalidate(Rkey(k), PdHandle(1), 9)) << "invalidated twice";
  // Deregistering the region unbinds what is bound to it.
  const uint32_t k2 = (k & ~0xffu) | ((k + 1) & 0xffu);
  ASSERT_EQ(t.bind_mw(PdHandle(1), 9, {idx, k2, mr->lkey.value(), a, 64, kAccessRemoteRead}), WcStatus::Success);
  EXPECT_TRUE(t.dereg(mr->lkey));
  EXPECT_FALSE(t.mw(idx)->bound);
  EXPECT_EQ(t.check_remote(Rkey(k2), PdHandle(1), a, 8, kAccessRemoteRead, nullptr, 9), KeyCheck::BadKey);
  EXPECT_TRUE(t.dealloc_mw(idx));
  EXPECT_EQ(t.mw(idx), nullptr);
}

TEST(MrTable, WindowKeysNeverMeetRegionKeys) {
  MrTable t(11);
  static uint8_t buf[64];
  std::set<uint32_t> blocks;
  for (int i = 0; i < 200; ++i) {
    auto mr = t.reg(PdHandle(1), uint64_t(buf), 64, 0);
    ASSERT_TRUE(mr.ok());
    blocks.insert(mr->lkey.value() >> 8);
    blocks.insert(mr->rkey.value() >> 8);
  }
  for (int i = 0; i < 200; ++i) {
    auto w = t.alloc_mw(PdHandle(1), 1 + i % 2);
    ASSERT_TRUE(w.ok());
    EXPECT_TRUE(blocks.insert(w->index()).second) << "a window's 256 rkeys include a region's key";
  }
  EXPECT_EQ(t.alloc_mw(PdHandle(1), 3).error().code, EINVAL);
}
