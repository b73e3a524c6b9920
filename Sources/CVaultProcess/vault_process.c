#include "vault_process.h"

#include <sys/prctl.h>

int vault_disable_dumping(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int vault_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
