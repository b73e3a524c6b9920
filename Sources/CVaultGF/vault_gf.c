// Region multiply-accumulate over GF(2^8), the inner loop of the dispersal (IDA).
// Split-nibble method (as in ISA-L and Jerasure): c*x = c*(x & 15) ^ c*(x >> 4 << 4), each
// half a 16-entry table looked up 16 or 32 bytes at a time with PSHUFB.
#include "vault_gf.h"

#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static uint8_t gf_mul(uint8_t a, uint8_t b) {
    uint8_t p = 0;
    for (int i = 0; i < 8; i++) {
        if (b & 1) p ^= a;
        uint8_t carry = a & 0x80;
        a <<= 1;
        if (carry) a ^= 0x1b;
        b >>= 1;
    }
    return p;
}

static void nibble_tables(uint8_t c, uint8_t low[16], uint8_t high[16]) {
    for (int x = 0; x < 16; x++) {
        low[x] = gf_mul(c, (uint8_t)x);
        high[x] = gf_mul(c, (uint8_t)(x << 4));
    }
}

static void mul_add_scalar(uint8_t *dst, const uint8_t *src, size_t length, uint8_t c) {
    uint8_t low[16], high[16];
    nibble_tables(c, low, high);
    for (size_t i = 0; i < length; i++) {
        dst[i] ^= low[src[i] & 15] ^ high[src[i] >> 4];
    }
}

#if defined(__x86_64__)
__attribute__((target("ssse3")))
static void mul_add_ssse3(uint8_t *dst, const uint8_t *src, size_t length, uint8_t c) {
    uint8_t low[16], high[16];
    nibble_tables(c, low, high);
    const __m128i tlow = _mm_loadu_si128((const __m128i *)low);
    const __m128i thigh = _mm_loadu_si128((const __m128i *)high);
    const __m128i mask = _mm_set1_epi8(0x0f);
    size_t i = 0;
    for (; i + 16 <= length; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i lo = _mm_shuffle_epi8(tlow, _mm_and_si128(x, mask));
        __m128i hi = _mm_shuffle_epi8(thigh, _mm_and_si128(_mm_srli_epi64(x, 4), mask));
        __m128i d = _mm_loadu_si128((const __m128i *)(dst + i));
        _mm_storeu_si128((__m128i *)(dst + i), _mm_xor_si128(d, _mm_xor_si128(lo, hi)));
    }
    for (; i < length; i++) dst[i] ^= low[src[i] & 15] ^ high[src[i] >> 4];
}

__attribute__((target("avx2")))
static void mul_add_avx2(uint8_t *dst, const uint8_t *src, size_t length, uint8_t c) {
    uint8_t low[16], high[16];
    nibble_tables(c, low, high);
    const __m256i tlow = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)low));
    const __m256i thigh = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)high));
    const __m256i mask = _mm256_set1_epi8(0x0f);
    size_t i = 0;
    for (; i + 32 <= length; i += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i lo = _mm256_shuffle_epi8(tlow, _mm256_and_si256(x, mask));
        __m256i hi = _mm256_shuffle_epi8(thigh, _mm256_and_si256(_mm256_srli_epi64(x, 4), mask));
        __m256i d = _mm256_loadu_si256((const __m256i *)(dst + i));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_xor_si256(d, _mm256_xor_si256(lo, hi)));
    }
    for (; i < length; i++) dst[i] ^= low[src[i] & 15] ^ high[src[i] >> 4];
}
#endif

static int force_scalar = 0;

void vault_gf_force_scalar(int force) { force_scalar = force; }

const char *vault_gf_kernel(void) {
#if defined(__x86_64__)
    if (!force_scalar && __builtin_cpu_supports("avx2")) return "avx2";
    if (!force_scalar && __builtin_cpu_supports("ssse3")) return "ssse3";
#endif
    return "scalar";
}

void vault_gf_mul_add(uint8_t *dst, const uint8_t *src, size_t length, uint8_t c) {
    if (c == 0) return;
#if defined(__x86_64__)
    if (!force_scalar && __builtin_cpu_supports("avx2")) { mul_add_avx2(dst, src, length, c); return; }
    if (!force_scalar && __builtin_cpu_supports("ssse3")) { mul_add_ssse3(dst, src, length, c); return; }
#endif
    mul_add_scalar(dst, src, length, c);
}
