#ifndef OVERTIME_CLIBUV_SHIM_H
#define OVERTIME_CLIBUV_SHIM_H
// libuv, as Debian's libuv1-dev (1.44) ships it. Overtime's own C is in COvertime; only
// OvertimeLoop imports either.
#include <uv.h>
#endif
