#define _GNU_SOURCE
#include "vault_process.h"

#include <spawn.h>
#include <sys/prctl.h>

int vault_disable_dumping(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int vault_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

int vault_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}
