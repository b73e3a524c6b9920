#ifndef VAULT_PROCESS_H
#define VAULT_PROCESS_H

#include <spawn.h>

/// Marks this process non-dumpable (prctl(PR_SET_DUMPABLE, 0)): no core file, and no
/// ptrace or /proc/PID/mem access by other processes of the same user. prctl is variadic,
/// which Swift cannot call. Returns 0 on success, -1 with errno set.
int vault_disable_dumping(void);

/// The dumpable flag (prctl(PR_GET_DUMPABLE)): 0 or 1, -1 on error.
int vault_is_dumpable(void);

/// Adds to `actions` the closing of every descriptor from `lowest` up in the child
/// (posix_spawn_file_actions_addclosefrom_np, glibc 2.34+, a GNU extension Swift does not
/// import). Returns 0, or an error number.
int vault_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

#endif
