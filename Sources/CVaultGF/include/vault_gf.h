#ifndef VAULT_GF_H
#define VAULT_GF_H

#include <stddef.h>
#include <stdint.h>

/// dst[b] = Σ_i coefficients[i] · rows[i][b] for b < length, in GF(2^8) with the AES
/// polynomial 0x11b: one pass that reads the k rows and writes dst once.
///
/// For dispersal only: the table lookups depend on the data, which is ciphertext and
/// public. Shamir on secret bytes uses the constant-time arithmetic in GF256.swift.
void vault_gf_combine(uint8_t *dst, const uint8_t *const *rows, const uint8_t *coefficients, size_t k, size_t length);

/// The kernel in use: "avx2", "ssse3" or "scalar".
const char *vault_gf_kernel(void);

/// Forces the portable kernel (for tests that compare kernels). 0 restores the default.
void vault_gf_force_scalar(int force);

#endif
