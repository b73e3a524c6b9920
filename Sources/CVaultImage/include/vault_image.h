#ifndef VAULT_IMAGE_H
#define VAULT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/// Result codes of the decoders below.
enum {
    VAULT_IMAGE_OK = 0,
    VAULT_IMAGE_MALFORMED = 1,   /* the library rejected the data */
    VAULT_IMAGE_TOO_LARGE = 2,   /* more than max_pixels */
    VAULT_IMAGE_NO_MEMORY = 3,
};

/// Decodes a PNG held in memory to 8-bit grayscale, composing any alpha on white.
/// On success *pixels is malloc'ed (width * height bytes) and the caller frees it.
int vault_png_decode_gray(const uint8_t *data, size_t length, size_t max_pixels,
                          uint8_t **pixels, uint32_t *width, uint32_t *height);

/// Decodes a JPEG held in memory to 8-bit grayscale. Same contract as above.
int vault_jpeg_decode_gray(const uint8_t *data, size_t length, size_t max_pixels,
                           uint8_t **pixels, uint32_t *width, uint32_t *height);

/// Encodes an 8-bit grayscale image as PNG. On success *png is malloc'ed and the
/// caller frees it.
int vault_png_encode_gray(const uint8_t *pixels, uint32_t width, uint32_t height,
                          uint8_t **png, size_t *length);

#endif
