#include "wire/crc32.hpp"

#include <immintrin.h>
#include <zlib.h>

namespace uroce::wire {

namespace {

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold16(__m128i acc, __m128i next, __m128i k) {
  __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
  __m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(hi, next), lo);
}

// x^n mod P as folding takes it: bit-reflected, times x (33 bits). Each fold multiplies the
// 64-bit halves of a 128-bit block by the constants for the distance D it moves them forward,
// x^(D+32) for the low half and x^(D-32) for the high one (Intel, "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ", 2009).
constexpr uint64_t fold_const(unsigned n) {
  uint64_t r = 1;
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if (r >> 32 & 1) r ^= 0x104c11db7;
  }
  uint64_t f = 0;
  for (int i = 0; i < 32; ++i)
    if (r >> i & 1) f |= uint64_t(1) << (31 - i);
  return f << 1;
}
template <unsigned N>
constexpr uint64_t K = fold_const(N);  // computed while compiling
static_assert(K<544> == 0x154442bd4 && K<480> == 0x1c6e41596);  // the paper's k1, k2

// The 16-byte blocks left, folded into x1, then Barrett reduction to 32 bits.
__attribute__((target("pclmul,sse4.1"))) inline uint32_t fold_tail(__m128i x1, const uint8_t* buf, size_t len) {
  const __m128i k3k4 = _mm_set_epi64x(K<96>, K<160>);
  const __m128i k5k0 = _mm_set_epi64x(0, K<64>);
  const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);  // mu and P, reflected
  while (len >= 16) {
    x1 = fold16(x1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)), k3k4);
    buf += 16;
    len -= 16;
  }
  // 128 -> 64 bits.
  const __m128i mask32 = _mm_setr_epi32(-1, 0, -1, 0);
  __m128i x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_and_si128(x1, mask32);
  x1 = _mm_clmulepi64_si128(x1, k5k0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  // Barrett reduction to 32 bits.
  x2 = _mm_and_si128(x1, mask32);
  x2 = _mm_clmulepi64_si128(x2, poly, 0x10);
  x2 = _mm_and_si128(x2, mask32);
  x2 = _mm_clmulepi64_si128(x2, poly, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return uint32_t(_mm_extract_epi32(x1, 1));
}

// Folds 64 bytes at a time in four 128-bit lanes. Works on the uninverted CRC state; len >= 64
// and a multiple of 16.
__attribute__((target("pclmul,sse4.1"))) uint32_t crc32_fold(const uint8_t* buf, size_t len, uint32_t crc) {
  const __m128i k1k2 = _mm_set_epi64x(K<480>, K<544>);
  const __m128i k3k4 = _mm_set_epi64x(K<96>, K<160>);
  __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
  __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 16));
  __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 32));
  __m128i x4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 48));
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(int(crc)));
  buf += 64;
  len -= 64;
  while (len >= 64) {
    x1 = fold16(x1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)), k1k2);
    x2 = fold16(x2, _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 16)), k1k2);
    x3 = fold16(x3, _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 32)), k1k2);
    x4 = fold16(x4, _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + 48)), k1k2);
    buf += 64;
    len -= 64;
  }
  x1 = fold16(x1, x2, k3k4);
  x1 = fold16(x1, x3, k3k4);
  x1 = fold16(x1, x4, k3k4);
  return fold_tail(x1, buf, len);
}

#define UROCE_VPCLMUL __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1")))

UROCE_VPCLMUL inline __m512i fold64(__m512i acc, __m512i next, __m512i k) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00), _mm512_clmulepi64_epi128(acc, k, 0x11), next,
                                   0x96);  // a ^ b ^ c
}

template <unsigned Distance>
UROCE_VPCLMUL inline __m512i fold_consts() {
  constexpr long long hi = K<Distance - 32>, lo = K<Distance + 32>;
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

// The same with 512-bit registers, four at a time: 256 bytes a step, four times the 128-bit
// lanes of crc32_fold. len >= 256 and a multiple of 16.
UROCE_VPCLMUL uint32_t crc32_fold512(const uint8_t* buf, size_t len, uint32_t crc) {
  const __m512i k4 = fold_consts<4 * 512>(), k1 = fold_consts<512>();
  __m512i x0 = _mm512_loadu_si512(buf), x1 = _mm512_loadu_si512(buf + 64);
  __m512i x2 = _mm512_loadu_si512(buf + 128), x3 = _mm512_loadu_si512(buf + 192);
  x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(int(crc))));
  buf += 256;
  len -= 256;
  while (len >= 256) {
    x0 = fold64(x0, _mm512_loadu_si512(buf), k4);
    x1 = fold64(x1, _mm512_loadu_si512(buf + 64), k4);
    x2 = fold64(x2, _mm512_loadu_si512(buf + 128), k4);
    x3 = fold64(x3, _mm512_loadu_si512(buf + 192), k4);
    buf += 256;
    len -= 256;
  }
  x0 = fold64(x0, x1, k1);
  x0 = fold64(x0, x2, k1);
  x0 = fold64(x0, x3, k1);
  while (len >= 64) {
    x0 = fold64(x0, _mm512_loadu_si512(buf), k1);
    buf += 64;
    len -= 64;
  }
  // The four lanes onto the last: the first moves 384 bits forward, the next 256, then 128.
  const __m512i lanes = _mm512_set_epi64(0, 0, K<96>, K<160>, K<224>, K<288>,
                                         K<352>, K<416>);
  const __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(x0, lanes, 0x00), _mm512_clmulepi64_epi128(x0, lanes, 0x11));
  // (The unmasked extract leaves a lane undefined that GCC 12 then warns of.)
  const __m128i z = _mm_setzero_si128();
  __m128i r = _mm_ternarylogic_epi64(_mm512_mask_extracti32x4_epi32(z, 0xf, x0, 3), _mm512_mask_extracti32x4_epi32(z, 0xf, t, 0),
                                     _mm512_mask_extracti32x4_epi32(z, 0xf, t, 1), 0x96);
  r = _mm_xor_si128(r, _mm512_mask_extracti32x4_epi32(z, 0xf, t, 2));
  return fold_tail(r, buf, len);
}

Crc32Impl detect() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse4.1")) return Crc32Impl::table;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq"))
    return Crc32Impl::vpclmul;
  return Crc32Impl::clmul;
}

const Crc32Impl kBest = detect();

}  // namespace

bool crc32_accelerated() { return kBest != Crc32Impl::table; }
Crc32Impl crc32_best() { return kBest; }

uint32_t crc32_update_using(Crc32Impl impl, uint32_t crc, const uint8_t* data, size_t len) {
  if (impl > kBest) impl = kBest;  // never an instruction this CPU lacks
  if (len == 0) return crc;          // (zlib's crc32 of a null pointer is its initial value, 0)
  const size_t chunk = len & ~size_t(15);
  if (impl == Crc32Impl::vpclmul && len >= 256)
    crc = ~crc32_fold512(data, chunk, ~crc);
  else if (impl != Crc32Impl::table && len >= 64)
    crc = ~crc32_fold(data, chunk, ~crc);
  else
    return uint32_t(crc32(crc, data, uInt(len)));
  return len > chunk ? uint32_t(crc32(crc, data + chunk, uInt(len - chunk))) : crc;
}

uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t len) { return crc32_update_using(kBest, crc, data, len); }

}  // namespace uroce::wire
