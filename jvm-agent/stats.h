/* The agent's measurement (option "stats" or VIPROF_AGENT_STATS=1; off by default): time
 * spent in each callback kind and in the writer, CPU (the calling thread's) and wall, and
 * the records written by type, printed to stderr when a map is closed; and the options
 * that switch parts of the agent off to measure them (noop, inline=no). The clocks are
 * read only when stats are on: off, each site costs one predictable branch. Callbacks
 * call vp_stats__begin/__end/__count: atomic adds, no lock, no allocation. Internal to
 * jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_STATS_H
#define VIPROF_JVM_AGENT_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum st_kind {
	ST_LOAD, ST_UNLOAD, ST_DYNAMIC, ST_PREPARE, ST_GC, ST_WRITER, ST_WRITER_NAMES, ST_SCAN, ST_SCAN_DECODE,
	ST_GC_WALK, ST_FLUSH, ST_ENUMERATE, ST_THREAD_NAMES, ST_AGENT_THREAD,
	ST_NKINDS
};
struct st_mark {
	uint64_t wall, cpu;
};

/* CLOCK_MONOTONIC in ns: every time the agent writes. */
uint64_t now_ns(void);

/* Options stats, noop and inline=no (len bytes at p): true when p was one. env: the
 * value of VIPROF_AGENT_STATS (NULL when unset). */
bool vp_stats__option(const char *p, size_t len);
void vp_stats__env(const char *env);
bool vp_stats__on(void);
const bool *vp_stats__on_flag(void);   /* for locks.c, which asks it later */
bool vp_stats__noop(void);       /* callbacks return at once (what the JVM itself pays) */
bool vp_stats__no_inline(void);  /* no INLINE records */

void vp_stats__begin(struct st_mark *m);
void vp_stats__end(enum st_kind k, const struct st_mark *m);
void vp_stats__count(enum st_kind k);
uint64_t vp_stats__n(enum st_kind k);
/* The records of a map, by type (& 15), and their bytes, added to the totals. */
void vp_stats__records(const uint64_t n[16], const uint64_t bytes[16]);
void vp_stats__print(void);

#endif
