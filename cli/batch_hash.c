/* SHA-256 (FIPS 180-4) for the input hashes of `migc batch` results and for the
 * shard a model falls in. A standard hash, so that a user (and a test) can
 * recompute both with sha256sum or Python's hashlib. */
#include "batch.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  uint32_t h[8];
  uint8_t buf[64];
  size_t fill;
  uint64_t total;
} sha256_ctx;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

/* Rotate right by n (0 < n < 32). */
static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state: the eight working variables rotate through the
 * argument order of ROUND instead of being moved (a memmove per round costs 3x). */
#define S0(x) (rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22))
#define S1(x) (rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25))
#define ROUND(a, b, c, d, e, f, g, h, i)                                     \
  do {                                                                       \
    uint32_t t1 = h + S1(e) + ((e & f) ^ (~e & g)) + K[i] + w[i];            \
    d += t1;                                                                 \
    h = t1 + S0(a) + ((a & b) ^ (a & c) ^ (b & c));                          \
  } while (0)
static void block(sha256_ctx *c, const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
  for (int i = 0; i < 64; i += 8) {
    ROUND(a, b, cc, d, e, f, g, h, i);
    ROUND(h, a, b, cc, d, e, f, g, i + 1);
    ROUND(g, h, a, b, cc, d, e, f, i + 2);
    ROUND(f, g, h, a, b, cc, d, e, i + 3);
    ROUND(e, f, g, h, a, b, cc, d, i + 4);
    ROUND(d, e, f, g, h, a, b, cc, i + 5);
    ROUND(cc, d, e, f, g, h, a, b, i + 6);
    ROUND(b, cc, d, e, f, g, h, a, i + 7);
  }
  c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d, c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}
#undef ROUND
#undef S1
#undef S0

/* The initial hash value (FIPS 180-4, 5.3.3). */
static void init(sha256_ctx *c) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, h0, sizeof h0);
  c->fill = 0;
  c->total = 0;
}

/* Adds n bytes of message. */
static void update(sha256_ctx *c, const uint8_t *p, size_t n) {
  c->total += n;
  while (n) {
    if (!c->fill && n >= 64) { /* whole blocks straight from the input */
      block(c, p);
      p += 64, n -= 64;
      continue;
    }
    size_t k = 64 - c->fill < n ? 64 - c->fill : n;
    memcpy(c->buf + c->fill, p, k);
    c->fill += k, p += k, n -= k;
    if (c->fill == 64) block(c, c->buf), c->fill = 0;
  }
}

/* Pads the message (0x80, zeros, its bit length big-endian) and writes the digest as hex. */
static void final_hex(sha256_ctx *c, char hex[65]) {
  uint64_t bits = c->total * 8;
  uint8_t pad[72] = {0x80};
  size_t padlen = (c->fill < 56 ? 56 : 120) - c->fill;
  for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
  update(c, pad, padlen + 8);
  for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", c->h[i]);
}

void batch_sha256_hex(const void *p, size_t len, char hex[65]) {
  sha256_ctx c;
  init(&c);
  update(&c, p, len);
  final_hex(&c, hex);
}

int batch_sha256_file(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  static uint8_t buf[1 << 16];
  sha256_ctx c;
  init(&c);
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f))) update(&c, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    errno = EIO;
    return -1;
  }
  final_hex(&c, hex);
  return 0;
}

int batch_shard_of(const char *name, int n) {
  char hex[65];
  batch_sha256_hex(name, strlen(name), hex);
  uint64_t v = 0;
  for (int i = 0; i < 16; i++) v = v << 4 | (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10);
  return (int)(v % (uint64_t)n);
}
