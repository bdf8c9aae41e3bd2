#ifndef OVERTIME_CLIBUV_SHIM_H
#define OVERTIME_CLIBUV_SHIM_H
// libuv, as Debian's libuv1-dev (1.44) ships it. Overtime's own C is in COvertime; only
// OvertimeLoop imports either.
#include <uv.h>

// uv_loop_configure is variadic, which Swift cannot call: the one option Overtime sets.
// Has libuv count the time the loop waits in its poll (uv_metrics_idle_time).
static inline int overtime_uv_count_idle_time(uv_loop_t *loop) {
    return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}
#endif
