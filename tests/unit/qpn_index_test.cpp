// The QPN index against std::map under random inserts, lookups and erases (deletion moves
// entries back, so every later lookup of a run must still succeed).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../common/seed.hpp"
#include "verbs/qpn_index.hpp"

using uroce::verbs::QpnIndex;

TEST(QpnIndex, AgreesWithAMapUnderRandomChanges) {
  uint64_t seed = uroce::test::test_seed(31);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  QpnIndex<int> idx;
  std::map<uint32_t, int*> ref;
  std::vector<int> objs(64);
  // A small key space makes long probe runs and many erases inside them.
  for (int step = 0; step < 200'000; ++step) {
    uint32_t q = uint32_t(rng() % 5000) * 97 & 0xffffff;
    switch (rng() % 3) {
      case 0: {
        int* o = &objs[rng() % objs.size()];
        idx.insert(q, o);
        ref[q] = o;
        break;
      }
      case 1:
        idx.erase(q);
        ref.erase(q);
        break;
      default: {
        auto it = ref.find(q);
        ASSERT_EQ(idx.find(q), it == ref.end() ? nullptr : it->second) << "step " << step << " qpn " << q;
      }
    }
    ASSERT_EQ(idx.size(), ref.size()) << "step " << step;
  }
  for (const auto& [q, o] : ref) ASSERT_EQ(idx.find(q), o) << "qpn " << q;
}

TEST(QpnIndex, EmptyAndUnknown) {
  QpnIndex<int> idx;
  EXPECT_EQ(idx.find(5), nullptr);
  idx.erase(5);
  int x = 0;
  idx.insert(5, &x);
  EXPECT_EQ(idx.find(5), &x);
  EXPECT_EQ(idx.find(6), nullptr);
  idx.erase(6);
  EXPECT_EQ(idx.size(), 1u);
  idx.erase(5);
  EXPECT_EQ(idx.find(5), nullptr);
  EXPECT_EQ(idx.size(), 0u);
}
