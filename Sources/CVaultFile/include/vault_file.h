#ifndef VAULT_FILE_H
#define VAULT_FILE_H

#include <stdint.h>

/// Starts writing out the dirty pages of bytes [start, start + length) of `fd`, without
/// waiting (sync_file_range(SYNC_FILE_RANGE_WRITE)). Returns 0, or -1 with errno set.
int vault_start_write_back(int fd, int64_t start, int64_t length);

/// Renames `from` to `to` unless `to` exists (renameat2(RENAME_NOREPLACE)). Returns 0, or -1
/// with errno set: EEXIST when `to` exists, EINVAL where the file system cannot refuse.
int vault_rename_no_replace(const char *from, const char *to);

/// A file in memory only (memfd_create(MFD_CLOEXEC)): a recovery kit's scanned pieces are
/// read from it as from a keystore's piece files, and never touch a disk. Returns the
/// descriptor, or -1 with errno set.
int vault_memory_file(const char *name);

#endif
