/* Shared helpers of the migc CPU runtime: element sizes, half-precision
 * conversions and error texts (contract in mg_runtime.h). */
#include "mg_runtime.h"

#include <string.h>
#if !defined(MG_RUNTIME_PORTABLE) && defined(__x86_64__) && (defined(__F16C__) || defined(__AVX2__) || defined(__AVX512F__))
#define MG_RT_X86_HALF 1
#include <immintrin.h>
#endif
#if !defined(MG_RUNTIME_PORTABLE) && defined(__aarch64__) && defined(__ARM_NEON)
#define MG_RT_NEON_HALF 1
#include <arm_neon.h>
#endif

size_t mg_rt_dtype_size(mg_rt_dtype t) {
  switch (t) {
  case MG_RT_U8: case MG_RT_I8: case MG_RT_BOOL: return 1;
  case MG_RT_U16: case MG_RT_I16: case MG_RT_F16: case MG_RT_BF16: return 2;
  case MG_RT_F32: case MG_RT_I32: case MG_RT_U32: return 4;
  case MG_RT_I64: case MG_RT_U64: case MG_RT_F64: return 8;
  case MG_RT_STRING: return sizeof(const char *);
  }
  return 0;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float mg_rt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));
  if (exp) return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  if (!man) return bits_float(sign);
  /* subnormal half: man * 2^-24, exact in float */
  float v = (float)man * (1.0f / 16777216.0f);
  return sign ? -v : v;
}

uint16_t mg_rt_f32_to_f16(float f) {
  uint32_t u = float_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
  if (a < 0x38800000u) { /* result is subnormal or zero: round a * 2^24 to an integer */
    float v = bits_float(a) * 16777216.0f;
    uint32_t q = (uint32_t)v;
    float rem = v - (float)q;
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

float mg_rt_bf16_to_f32(uint16_t h) { return bits_float((uint32_t)h << 16); }

uint16_t mg_rt_f32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

const char *mg_rt_strerror(int code) {
  switch (code) {
  case MG_RT_OK: return "ok";
  case MG_RT_EIO: return "cannot read the weights file";
  case MG_RT_EFORMAT: return "the weights file does not belong to this model";
  case MG_RT_ENOMEM: return "out of memory";
  case MG_RT_EARG: return "bad argument";
  case MG_RT_EUNSUPPORTED: return "the model has a node migc could not convert (see the conversion report)";
  case MG_RT_EDEVICE: return "a device call failed (the message above names it)";
  case MG_RT_ELAYOUT: return "the weights are prepared in a layout this runtime does not read (regenerate the project)";
  }
  return "unknown error";
}

uint64_t mg_rt_hash(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { /* FNV-1a over little-endian 64-bit words: 8x fewer multiplies */
    uint64_t w = 0;
    for (int k = 7; k >= 0; k--) w = (w << 8) | p[i + (size_t)k];
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* Element i of 16-bit data at any alignment. */
static uint16_t half_at(const unsigned char *s, size_t i) {
  uint16_t h;
  memcpy(&h, s + 2 * i, 2);
  return h;
}

/* Every half in 8 lanes at once where the build has F16C (AVX-512: 16 lanes),
 * NEON's fcvtl on aarch64, the scalar conversion elsewhere: all exact, so each
 * path gives the same floats. */
void mg_rt_expand_f16(float *dst, const void *src, size_t n) {
  const unsigned char *s = src;
  size_t i = 0;
#if defined(MG_RT_X86_HALF) && defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + 2 * i))));
#endif
#if defined(MG_RT_X86_HALF) && defined(__F16C__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
#elif defined(MG_RT_NEON_HALF)
  for (; i + 4 <= n; i += 4) {
    uint16x4_t h = vreinterpret_u16_u8(vld1_u8(s + 2 * i));
    vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(h)));
  }
#endif
  for (; i < n; i++) dst[i] = mg_rt_f16_to_f32(half_at(s, i));
}

/* bfloat16 is float32's top half: a 16-bit shift per element (AVX2 and NEON
 * widen and shift 8 or 4 lanes), exact. */
void mg_rt_expand_bf16(float *dst, const void *src, size_t n) {
  const unsigned char *s = src;
  size_t i = 0;
#if defined(MG_RT_X86_HALF) && defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + 2 * i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
#elif defined(MG_RT_NEON_HALF)
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u8(vld1_u8(s + 2 * i)), 16)));
#endif
  for (; i < n; i++) dst[i] = mg_rt_bf16_to_f32(half_at(s, i));
}

void mg_split_range(int n, int parts, int part, int align, int *b, int *e) {
  int piece = (n + parts - 1) / parts;
  piece = (piece + align - 1) / align * align;
  *b = part * piece < n ? part * piece : n;
  *e = n - *b > piece ? *b + piece : n;
  if (align > 1 && n - *e == 1) *e = n;             /* the next range would be one item */
  if (align > 1 && *e - *b == 1 && *b > 0) *b = *e; /* merged into the one before */
}
