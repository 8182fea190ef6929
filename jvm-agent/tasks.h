/* This process's threads as the kernel names them (/proc/self/task/TID/comm). Internal
 * to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_TASKS_H
#define VIPROF_JVM_AGENT_TASKS_H

#include <stdbool.h>
#include <stdint.h>

#define VP_TASK_NAME_LEN 15   /* the kernel keeps 15 bytes of a thread's name */

/* Calls fn(tid, name, ctx) for each thread, the name without its newline; stops early
 * when fn returns true. Never allocates; safe in a library constructor. */
void vp_tasks__each(bool (*fn)(uint32_t tid, const char *name, void *ctx), void *ctx);

#endif
