/* Counted checks for the C test programs: a failed one prints where it was (and the seed, in a
 * program that draws from one) and the run goes on; main prints the totals. */
#pragma once
#include <stdio.h>

static int passed, failed;
static unsigned seed;  /* what a seeded program's randomness came from */
static int seeded;     /* set by a seeded program: its failures name the seed */
#define CHECK(c, ...)                                              \
  do {                                                             \
    if (c) {                                                       \
      passed++;                                                    \
    } else {                                                       \
      failed++;                                                    \
      printf("FAIL %s:%d", __FILE__, __LINE__);                    \
      if (seeded) printf(" (seed %u)", seed);                      \
      printf(": ");                                                \
      printf(__VA_ARGS__);                                         \
      printf("\n");                                                \
    }                                                              \
  } while (0)
