// sync_file_range, renameat2 and memfd_create are GNU extensions that Swift's Glibc module does not export.
#define _GNU_SOURCE
#include "vault_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>

int vault_start_write_back(int fd, int64_t start, int64_t length) {
    return sync_file_range(fd, start, length, SYNC_FILE_RANGE_WRITE);
}

int vault_rename_no_replace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

int vault_memory_file(const char *name) {
    return memfd_create(name, MFD_CLOEXEC);
}
