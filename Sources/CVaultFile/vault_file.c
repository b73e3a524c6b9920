// sync_file_range is a GNU extension that Swift's Glibc module does not export.
#define _GNU_SOURCE
#include "vault_file.h"

#include <fcntl.h>

int vault_start_write_back(int fd, int64_t start, int64_t length) {
    return sync_file_range(fd, start, length, SYNC_FILE_RANGE_WRITE);
}

