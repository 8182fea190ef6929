/* A session's time zero: the CLOCK_MONOTONIC instant every view of it counts from
 * (report --time, the HTML time strip, the JSON and text headers, viprof maps, the
 * service's windows). It is when sampling started, the instant the session's duration
 * counts from (END's duration_ns), which the recorder writes as the META key
 * VP_META_SAMPLING_START right after starting the sampler; the stream's creation (the
 * recorder's own start, seconds earlier when it attached to JVMs or loaded the walker's
 * tables first) is only the fallback for sessions written before that key existed. */
#ifndef VIPROF_COMMON_TIMEZERO_H
#define VIPROF_COMMON_TIMEZERO_H

#include <stdbool.h>
#include <stdint.h>

#define VP_META_SAMPLING_START "sampling_start_monotonic_ns"

/* The time zero of the session stream at path: the sampling start when the stream says
 * it (in a META record before its first sample), else its creation time, else 0 (an
 * unreadable stream). *sampling (may be NULL) says which of the two it is. */
uint64_t vp_session_time_zero(const char *stream_path, bool *sampling);

#endif
