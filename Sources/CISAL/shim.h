#include <isa-l/erasure_code.h>
