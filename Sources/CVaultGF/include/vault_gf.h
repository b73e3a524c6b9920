#ifndef VAULT_GF_H
#define VAULT_GF_H

#include <stddef.h>
#include <stdint.h>

/// dst[i] ^= c * src[i] for i < length, in GF(2^8) with the AES polynomial 0x11b.
///
/// For dispersal only: the table lookups depend on the data, which is ciphertext and
/// public. Shamir on secret bytes uses the constant-time arithmetic in GF256.swift.
void vault_gf_mul_add(uint8_t *dst, const uint8_t *src, size_t length, uint8_t c);

/// The kernel in use: "avx2", "ssse3" or "scalar".
const char *vault_gf_kernel(void);

/// Forces the portable kernel (for tests that compare kernels). 0 restores the default.
void vault_gf_force_scalar(int force);

#endif
