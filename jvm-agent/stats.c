/* The agent's measurement (jvm-agent/stats.h). */
#include "jvm-agent/stats.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const st_name[ST_NKINDS] = {
	"CompiledMethodLoad", "CompiledMethodUnload", "DynamicCodeGenerated", "ClassPrepare",
	"GarbageCollectionFinish", "writer (all)", "writer: naming", "code heap walk", "code heap: new code",
	"GarbageCollectionStart: code heap walk", "writer: flush (zlib, write)", "class enumeration",
	"thread names", "agent thread (all)",
};

static struct {
	bool on;
	bool noop;
	bool no_inline;
	uint64_t n[ST_NKINDS], wall[ST_NKINDS], cpu[ST_NKINDS];
	uint64_t rec_n[16], rec_bytes[16];   /* written to the file, by record type */
} stats;

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool vp_stats__option(const char *p, size_t len)
{
	if (len == 5 && !memcmp(p, "stats", 5))
		stats.on = true;
	else if (len == 4 && !memcmp(p, "noop", 4))
		stats.noop = true;
	else if (len == 9 && !memcmp(p, "inline=no", 9))
		stats.no_inline = true;
	else
		return false;
	return true;
}

void vp_stats__env(const char *env)
{
	if (env && *env && strcmp(env, "0"))
		stats.on = true;
}

bool vp_stats__on(void) { return stats.on; }
const bool *vp_stats__on_flag(void) { return &stats.on; }
bool vp_stats__noop(void) { return stats.noop; }
bool vp_stats__no_inline(void) { return stats.no_inline; }

void vp_stats__begin(struct st_mark *m)
{
	if (stats.on) {
		m->wall = now_ns();
		m->cpu = thread_cpu_ns();
	}
}

void vp_stats__end(enum st_kind k, const struct st_mark *m)
{
	if (!stats.on)
		return;
	__atomic_add_fetch(&stats.n[k], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&stats.wall[k], now_ns() - m->wall, __ATOMIC_RELAXED);
	__atomic_add_fetch(&stats.cpu[k], thread_cpu_ns() - m->cpu, __ATOMIC_RELAXED);
}

void vp_stats__count(enum st_kind k)
{
	if (stats.on)
		__atomic_add_fetch(&stats.n[k], 1, __ATOMIC_RELAXED);
}

uint64_t vp_stats__n(enum st_kind k)
{
	return __atomic_load_n(&stats.n[k], __ATOMIC_RELAXED);
}

void vp_stats__records(const uint64_t n[16], const uint64_t bytes[16])
{
	for (int t = 0; t < 16; t++) {
		stats.rec_n[t] += n[t];
		stats.rec_bytes[t] += bytes[t];
	}
}

void vp_stats__print(void)
{
	static const char *const rec[16] = { [1] = "META", "EPOCH_BEGIN", "METHOD_LOAD", "METHOD_UNLOAD",
		"INLINE", "METHOD_NAME", "CODE_BLOB", "EPOCH_END", "METHOD_PTR", "INLINE2", "METHOD_LOAD2",
		"METHOD_NAMES" };
	if (!stats.on)
		return;
	for (int k = 0; k < ST_NKINDS; k++)
		fprintf(stderr, "viprof agent stats: %-24s n=%-7llu cpu_ms=%.1f wall_ms=%.1f\n", st_name[k],
			(unsigned long long)stats.n[k], stats.cpu[k] / 1e6, stats.wall[k] / 1e6);
	for (int t = 0; t < 16; t++)
		if (stats.rec_n[t])
			fprintf(stderr, "viprof agent stats: record %-13s n=%-7llu bytes=%llu\n", rec[t] ? rec[t] : "?",
				(unsigned long long)stats.rec_n[t], (unsigned long long)stats.rec_bytes[t]);
}
