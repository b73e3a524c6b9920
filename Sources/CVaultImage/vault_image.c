// Image decoding for QR scanning. libpng and libjpeg signal errors with longjmp,
// which must never cross a Swift frame, so every library call lives here.
#include "vault_image.h"

#include <png.h>
#include <jpeglib.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

int vault_png_decode_gray(const uint8_t *data, size_t length, size_t max_pixels,
                          uint8_t **pixels, uint32_t *width, uint32_t *height) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, data, length)) {
        return VAULT_IMAGE_MALFORMED;
    }
    if (image.width == 0 || image.height == 0 ||
        (size_t)image.width > max_pixels / (size_t)image.height) {
        png_image_free(&image);
        return VAULT_IMAGE_TOO_LARGE;
    }
    image.format = PNG_FORMAT_GRAY;
    size_t size = (size_t)image.width * image.height;
    uint8_t *buffer = malloc(size);
    if (buffer == NULL) {
        png_image_free(&image);
        return VAULT_IMAGE_NO_MEMORY;
    }
    // A transparent screenshot has light modules as alpha 0: compose on white.
    png_color white = {255, 255, 255};
    if (!png_image_finish_read(&image, &white, buffer, 0, NULL)) {
        free(buffer);
        png_image_free(&image);
        return VAULT_IMAGE_MALFORMED;
    }
    *pixels = buffer;
    *width = image.width;
    *height = image.height;
    return VAULT_IMAGE_OK;
}

struct vault_jpeg_error {
    struct jpeg_error_mgr base;
    jmp_buf escape;
};

static void vault_jpeg_error_exit(j_common_ptr info) {
    struct vault_jpeg_error *error = (struct vault_jpeg_error *)info->err;
    longjmp(error->escape, 1);
}

static void vault_jpeg_silence(j_common_ptr info, int level) {
    (void)info;
    (void)level;
}

int vault_jpeg_decode_gray(const uint8_t *data, size_t length, size_t max_pixels,
                           uint8_t **pixels, uint32_t *width, uint32_t *height) {
    struct jpeg_decompress_struct info;
    struct vault_jpeg_error error;
    uint8_t *volatile buffer = NULL;
    volatile int status = VAULT_IMAGE_MALFORMED;

    info.err = jpeg_std_error(&error.base);
    error.base.error_exit = vault_jpeg_error_exit;
    error.base.emit_message = vault_jpeg_silence;
    if (setjmp(error.escape)) {
        jpeg_destroy_decompress(&info);
        free(buffer);
        return status;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)length);
    if (jpeg_read_header(&info, TRUE) != JPEG_HEADER_OK) {
        jpeg_destroy_decompress(&info);
        return VAULT_IMAGE_MALFORMED;
    }
    if (info.image_width == 0 || info.image_height == 0 ||
        (size_t)info.image_width > max_pixels / (size_t)info.image_height) {
        jpeg_destroy_decompress(&info);
        return VAULT_IMAGE_TOO_LARGE;
    }
    info.out_color_space = JCS_GRAYSCALE;
    jpeg_start_decompress(&info);
    size_t stride = info.output_width;
    buffer = malloc(stride * info.output_height);
    if (buffer == NULL) {
        status = VAULT_IMAGE_NO_MEMORY;
        longjmp(error.escape, 1);
    }
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = buffer + (size_t)info.output_scanline * stride;
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    *pixels = buffer;
    *width = info.output_width;
    *height = info.output_height;
    jpeg_destroy_decompress(&info);
    return VAULT_IMAGE_OK;
}

int vault_png_encode_gray(const uint8_t *pixels, uint32_t width, uint32_t height,
                          uint8_t **png, size_t *length) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    image.width = width;
    image.height = height;
    image.format = PNG_FORMAT_GRAY;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&image, NULL, &size, 0, pixels, 0, NULL)) {
        return VAULT_IMAGE_MALFORMED;
    }
    uint8_t *buffer = malloc(size);
    if (buffer == NULL) {
        return VAULT_IMAGE_NO_MEMORY;
    }
    if (!png_image_write_to_memory(&image, buffer, &size, 0, pixels, 0, NULL)) {
        free(buffer);
        return VAULT_IMAGE_MALFORMED;
    }
    *png = buffer;
    *length = size;
    return VAULT_IMAGE_OK;
}
