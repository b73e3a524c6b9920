// Region linear combination over GF(2^8), the inner loop of the dispersal (IDA).
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

static void combine_scalar(uint8_t *dst, const uint8_t *const *rows, const uint8_t *coefficients, size_t k, size_t length,
                           size_t from) {
    for (size_t b = from; b < length; b++) {
        uint8_t sum = 0;
        for (size_t i = 0; i < k; i++) sum ^= gf_mul(coefficients[i], rows[i][b]);
        dst[b] = sum;
    }
}

// A stripe's rows are at most 255: their nibble tables, 32 bytes each, stay in L1.
#define MAX_ROWS 255

#if defined(__x86_64__)
__attribute__((target("ssse3")))
static void combine_ssse3(uint8_t *dst, const uint8_t *const *rows, const uint8_t *coefficients, size_t k, size_t length) {
    __m128i low[MAX_ROWS], high[MAX_ROWS];
    for (size_t i = 0; i < k; i++) {
        uint8_t l[16], h[16];
        nibble_tables(coefficients[i], l, h);
        low[i] = _mm_loadu_si128((const __m128i *)l);
        high[i] = _mm_loadu_si128((const __m128i *)h);
    }
    const __m128i mask = _mm_set1_epi8(0x0f);
    size_t b = 0;
    for (; b + 16 <= length; b += 16) {
        __m128i sum = _mm_setzero_si128();
        for (size_t i = 0; i < k; i++) {
            __m128i x = _mm_loadu_si128((const __m128i *)(rows[i] + b));
            sum = _mm_xor_si128(sum, _mm_xor_si128(_mm_shuffle_epi8(low[i], _mm_and_si128(x, mask)),
                                                   _mm_shuffle_epi8(high[i], _mm_and_si128(_mm_srli_epi64(x, 4), mask))));
        }
        _mm_storeu_si128((__m128i *)(dst + b), sum);
    }
    combine_scalar(dst, rows, coefficients, k, length, b);
}

__attribute__((target("avx2")))
static void combine_avx2(uint8_t *dst, const uint8_t *const *rows, const uint8_t *coefficients, size_t k, size_t length) {
    __m256i low[MAX_ROWS], high[MAX_ROWS];
    for (size_t i = 0; i < k; i++) {
        uint8_t l[16], h[16];
        nibble_tables(coefficients[i], l, h);
        low[i] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)l));
        high[i] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)h));
    }
    const __m256i mask = _mm256_set1_epi8(0x0f);
    size_t b = 0;
    for (; b + 32 <= length; b += 32) {
        __m256i sum = _mm256_setzero_si256();
        for (size_t i = 0; i < k; i++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(rows[i] + b));
            sum = _mm256_xor_si256(sum, _mm256_xor_si256(_mm256_shuffle_epi8(low[i], _mm256_and_si256(x, mask)),
                                                         _mm256_shuffle_epi8(high[i], _mm256_and_si256(_mm256_srli_epi64(x, 4), mask))));
        }
        _mm256_storeu_si256((__m256i *)(dst + b), sum);
    }
    combine_scalar(dst, rows, coefficients, k, length, b);
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

void vault_gf_combine(uint8_t *dst, const uint8_t *const *rows, const uint8_t *coefficients, size_t k, size_t length) {
    if (k == 0 || k > MAX_ROWS) return;
#if defined(__x86_64__)
    if (!force_scalar && __builtin_cpu_supports("avx2")) { combine_avx2(dst, rows, coefficients, k, length); return; }
    if (!force_scalar && __builtin_cpu_supports("ssse3")) { combine_ssse3(dst, rows, coefficients, k, length); return; }
#endif
    combine_scalar(dst, rows, coefficients, k, length, 0);
}
