// OpenSSL's libcrypto (Debian's libssl-dev): SHA-256 with the SHA extensions and AES-256-GCM
// with AES-NI and VAES, for the payload stream and the piece commitments (Docs/DECISIONS.md,
// "Format v2"). Only the EVP interface is used.
#include <openssl/evp.h>
