// Work queue indices: the producer's copy of the engine's `done` index is refreshed when the
// queue looks full, so freed slots are found again, and reset() empties the queue.
#include <gtest/gtest.h>

#include "verbs/wq.hpp"

using namespace uroce;

TEST(WorkQueue, FreedSlotsAreFoundOnceTheQueueLooksFull) {
  verbs::WorkQueue<verbs::SendWqe> q(4, 1, 0);
  ASSERT_EQ(q.capacity(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(q.free_slots(), 4 - i);
    ++q.prod_local;
  }
  q.publish();
  EXPECT_EQ(q.free_slots(), 0u);
  q.done.store(3);  // the engine completed three
  EXPECT_EQ(q.free_slots(), 3u);
  q.prod_local += 3;
  EXPECT_EQ(q.free_slots(), 0u);
  q.done.store(7);
  EXPECT_EQ(q.free_slots(), 4u);
  q.reset();
  EXPECT_EQ(q.prod.load(), 0u);
  EXPECT_EQ(q.done.load(), 0u);
  EXPECT_EQ(q.prod_local, 0u);
  EXPECT_EQ(q.free_slots(), 4u);
}
