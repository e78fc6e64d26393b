/* CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), fast enough to
 * check every byte of a .pth on its way to the .ckpt without being the bottleneck.
 *
 * Two implementations, chosen once at run time:
 *  - x86-64 with PCLMULQDQ and SSE4.1: carry-less multiplication folding (Intel,
 *    "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", 2009; the
 *    constants are those of zlib-ng's and Chromium's crc32_simd for this
 *    polynomial), about ten times the speed of a table;
 *  - everywhere else, slicing-by-8 over tables built once: eight bytes per step.
 * Both give the same value as zlib's crc32(); tests/unit/test_ckpt.c compares them
 * with a bitwise reference on every length around the vector boundaries. */
#include "ckpt_internal.h"
#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WT_CRC_CLMUL 1
#include <immintrin.h>
#endif

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
#ifdef WT_CRC_CLMUL
static int use_clmul;
#endif

/* Builds the slicing tables: table[0] is the classic byte table, table[k][b] the
 * CRC of byte b followed by k zero bytes. */
static void init_tables(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[0][b] = c;
  }
  for (int k = 1; k < 8; k++)
    for (int b = 0; b < 256; b++) table[k][b] = table[0][table[k - 1][b] & 0xff] ^ (table[k - 1][b] >> 8);
#ifdef WT_CRC_CLMUL
  __builtin_cpu_init();
  use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

/* Slicing-by-8 on the raw (not inverted) register. */
static uint32_t crc_slice8(uint32_t c, const unsigned char *p, size_t n) {
  for (; n && ((uintptr_t)p & 7); n--) c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi; /* little-endian words, as the reflected CRC consumes them */
    lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    lo ^= c;
    c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
        table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
  }
  while (n--) c = table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

#ifdef WT_CRC_CLMUL
/* Folds n bytes (n >= 64, a multiple of 16) into the raw register c: four 128-bit
 * lanes folded 64 bytes at a time, then into one lane, then Barrett-reduced to 32
 * bits. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t c, const unsigned char *p, size_t n) {
  static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4ull, 0x01c6e41596ull};
  static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0ull, 0x00ccaa009eull};
  static const uint64_t k5k0[2] __attribute__((aligned(16))) = {0x0163cd6124ull, 0};
  static const uint64_t poly[2] __attribute__((aligned(16))) = {0x01db710641ull, 0x01f7011641ull};
  __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;
  x1 = _mm_loadu_si128((const __m128i *)(p + 0x00));
  x2 = _mm_loadu_si128((const __m128i *)(p + 0x10));
  x3 = _mm_loadu_si128((const __m128i *)(p + 0x20));
  x4 = _mm_loadu_si128((const __m128i *)(p + 0x30));
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
  x0 = _mm_load_si128((const __m128i *)k1k2);
  p += 64, n -= 64;
  while (n >= 64) {
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
    x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
    x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
    x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
    y5 = _mm_loadu_si128((const __m128i *)(p + 0x00));
    y6 = _mm_loadu_si128((const __m128i *)(p + 0x10));
    y7 = _mm_loadu_si128((const __m128i *)(p + 0x20));
    y8 = _mm_loadu_si128((const __m128i *)(p + 0x30));
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
    x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
    x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
    x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
    p += 64, n -= 64;
  }
  /* Four lanes into one. */
  x0 = _mm_load_si128((const __m128i *)k3k4);
  x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
  x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
  x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
  x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
  x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
  x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
  x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
  x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
  x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
  while (n >= 16) {
    x2 = _mm_loadu_si128((const __m128i *)p);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    p += 16, n -= 16;
  }
  /* 128 bits to 64. */
  x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
  x3 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_srli_si128(x1, 8);
  x1 = _mm_xor_si128(x1, x2);
  x0 = _mm_loadl_epi64((const __m128i *)k5k0);
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_and_si128(x1, x3);
  x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  /* Barrett reduction to 32 bits. */
  x0 = _mm_load_si128((const __m128i *)poly);
  x2 = _mm_and_si128(x1, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
  x2 = _mm_and_si128(x2, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* ckpt_internal.h. Pass 0 to start, the previous result to continue. */
uint32_t wt_crc32(uint32_t crc, const void *buf, size_t n) {
  const unsigned char *p = buf;
  uint32_t c = ~crc;
  pthread_once(&table_once, init_tables);
#ifdef WT_CRC_CLMUL
  if (use_clmul && n >= 64) {
    size_t m = n & ~(size_t)15;
    c = crc_clmul(c, p, m);
    p += m, n -= m;
  }
#endif
  return ~crc_slice8(c, p, n);
}

/* ckpt_internal.h. The table version, so that tests can compare the two paths on
 * machines where the vector path is the one taken. */
uint32_t wt_crc32_portable(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&table_once, init_tables);
  return ~crc_slice8(~crc, buf, n);
}
