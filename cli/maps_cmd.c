/* viprof maps: inspect the agent's epoch code maps of one JVM. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/chunkfile.h"
#include "common/session_format.h"
#include "common/timezero.h"
#include "maps/codemap.h"
#include "maps/codemap_io.h"
#include "maps/codemap_format.h"
#include "maps/jit_index.h"
#include "postproc/profile.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: viprof maps [DIR] [--pid PID] COMMAND\n"
		"       viprof maps --perf-map FILE | --jitdump FILE COMMAND\n"
		"Inspects the JIT code maps the viprof agent wrote for one JVM.\n"
		"DIR is a session (maps in DIR/jit/PID), an agent dir=DIR (DIR/PID), or a PID directory;\n"
		"default '.'. --pid may be left out when DIR holds one JVM.\n"
		"commands:\n"
		"  list                  epochs: time span (s since the map began), reason, loads, live code\n"
		"  show EPOCH            the code loaded in one epoch, by address\n"
		"  diff A B              code loaded, unloaded and reused between epochs A and B\n"
		"  lookup ADDR [--at T]  who was at ADDR at T seconds (default: in each epoch), and its history\n"
		"  lookup NAME           every compiled copy of the methods whose name contains NAME\n"
		"  timeline [--all]      methods by epoch: compiled (N), moved (M), placed where other code had\n"
		"                        been (R: what a flat perf-PID.map misnames), live (-)\n"
		"  export-perf-map FILE  the flat map as perf-PID.map text, for perf report\n"
		"  export-jitdump FILE   the loads as a jitdump file: names, addresses, sizes and load times\n"
		"                        only (code bytes are zeros, no debug-info or unwind records); for\n"
		"                        jitdump readers such as `viprof maps --jitdump`. Not for `perf inject\n"
		"                        --jit`: perf uses a jitdump only when its perf.data holds an mmap of\n"
		"                        that file by the JVM, which viprof does not create; use\n"
		"                        export-perf-map with perf report instead\n"
		"  The exports create FILE (mode 0600) and do not overwrite one that exists, unless\n"
		"  --force is given and it is a regular file you own.\n"
		"examples:\n"
		"  viprof maps /tmp/s --pid 4242 list\n"
		"  viprof maps /tmp/s lookup 0x7f3a8c0123a0 --at 2.5\n"
		"  viprof maps /tmp/s export-perf-map /tmp/perf-4242.map\n");
}

static bool has_codemap(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool found = false;
	if (!d)
		return false;
	while (!found && (de = readdir(d)))
		found = !strncmp(de->d_name, "codemap", 7) && strstr(de->d_name, ".vpm");
	closedir(d);
	return found;
}

/* Finds the directory holding one JVM's maps; 0 or -errno with a message printed. */
static int find_pid_dir(const char *dir, long pid, char *out, size_t outlen)
{
	char base[PATH_MAX - 512];
	struct stat st;
	if (has_codemap(dir) && pid <= 0) {
		snprintf(out, outlen, "%s", dir);
		return 0;
	}
	snprintf(base, sizeof(base), "%s/jit", dir);
	if (stat(base, &st) || !S_ISDIR(st.st_mode))
		snprintf(base, sizeof(base), "%s", dir);
	if (pid > 0) {
		snprintf(out, outlen, "%s/%ld", base, pid);
		if (!has_codemap(out)) {
			fprintf(stderr, "viprof maps: no code maps for pid %ld in %s; check --pid (the agent writes %s/PID/codemap.vpm)\n",
				pid, base, base);
			return -ENOENT;
		}
		return 0;
	}
	DIR *d = opendir(base);
	if (!d) {
		fprintf(stderr, "viprof maps: cannot open %s: %s; pass a session directory\n", base, strerror(errno));
		return -errno;
	}
	int n = 0;
	char pids[512] = "";
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long p = strtol(de->d_name, &end, 10);
		char sub[PATH_MAX + 300];
		snprintf(sub, sizeof(sub), "%s/%s", base, de->d_name);
		if (*end || p <= 0 || !has_codemap(sub))
			continue;
		if (!n++)
			snprintf(out, outlen, "%s", sub);
		size_t l = strlen(pids);
		snprintf(pids + l, sizeof(pids) - l, "%s%ld", l ? ", " : "", p);
	}
	closedir(d);
	if (n == 1)
		return 0;
	if (!n)
		fprintf(stderr, "viprof maps: no code maps under %s; was the JVM run with the viprof agent?\n", base);
	else
		fprintf(stderr, "viprof maps: %s holds maps of several JVMs (%s); pick one with --pid\n", base, pids);
	return n ? -EINVAL : -ENOENT;
}

/* The time all seconds count from: the session's time zero when DIR is a session (as
 * 'report --time' counts, common/timezero.h), else the map's own creation. */
static uint64_t time_base;
static bool time_base_session;
static bool time_base_sampling;   /* the session says when its sampling started */

static void set_time_base(const struct vp_codemap *m, const char *dir)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, dir);
	uint64_t t0 = access(path, R_OK) == 0 ? vp_session_time_zero(path, &time_base_sampling) : 0;
	time_base = t0 ? t0 : m->created_ns;
	time_base_session = t0 != 0;
}

static double rel(const struct vp_codemap *m, uint64_t t)
{
	(void)m;
	return t ? ((double)t - (double)time_base) / 1e9 : 0.0;
}

static int cmd_list(const struct vp_codemap *m)
{
	printf("pid %u, %s, frame pointers %s%s%s\n", m->pid, m->vm[0] ? m->vm : "unknown VM",
	       (m->flags & VP_CM_META_FRAME_POINTERS) ? "on" : "off",
	       (m->flags & VP_CM_META_LATE_ATTACH) ? ", attached late" : "",
	       m->truncated ? ", map ends in a torn chunk (JVM crashed or still running)" : "");
	if (time_base_session)
		printf("times in seconds since the session's time zero (%s), as 'report --time' counts them; the map began "
		       "at %.3f s\n", time_base_sampling ? "its sampling start" : "its recorder's start: the session does not say "
		       "when sampling started", rel(m, m->created_ns));
	else
		printf("times in seconds since the map began (give the session's directory to count from its time "
		       "zero, as 'report --time' does)\n");
	printf("%6s %10s %10s %-7s %7s %7s %7s %10s %7s  %s\n", "epoch", "begin(s)", "end(s)", "reason", "loads",
	       "unloads", "live", "live-bytes", "dropped", "ended-by");
	for (size_t i = 0; i < m->nepochs; i++) {
		const struct vp_cm_epoch_info *e = &m->epochs[i];
		char end[32] = "-";
		if (e->ended)
			snprintf(end, sizeof(end), "%.3f", rel(m, e->t_end));
		printf("%6zu %10.3f %10s %-7s %7u %7u ", i, rel(m, e->t_begin), end, vp_cm_reason_name(e->reason),
		       e->nloads, e->nunloads);
		if (e->ended)
			printf("%7u %10" PRIu64 " %7" PRIu64, e->live_methods, e->live_bytes, e->dropped);
		else
			printf("%7s %10s %7s", "-", "-", "-");
		/* The GC that began the next epoch is the one that closed this one. */
		char gc[64];
		printf("  %s\n", i + 1 < m->nepochs && *vp_codemap__gc_text(m, i + 1, gc, sizeof(gc)) ? gc
		       : i + 1 < m->nepochs ? vp_cm_reason_name(m->epochs[i + 1].reason) : "-");
	}
	printf("%zu compiled methods, %zu stubs, %zu methods with inlining\n", m->nmethods, m->nblobs, m->ninlines);
	size_t nlocks = 0;
	for (size_t i = 0; i < m->nallocs; i++)
		nlocks += m->allocs[i].kind == VP_CM_LOCK_SAMPLE;
	if (m->nallocs - nlocks)
		printf("%zu sampled allocations (record -e alloc)\n", m->nallocs - nlocks);
	if (nlocks)
		printf("%zu contended lock waits (record -e lock)\n", nlocks);
	printf("reason: what began the epoch (start; gc: a garbage collection; reuse: an address about to hold "
	       "other code; attach: the agent attached late); dropped: code events the agent's queue had no room "
	       "for, so far (their samples may show as [unknown]); ended-by: what began the next epoch, for a GC "
	       "the JVM's collection count and kind (young, full, or concurrent: a pause of a concurrent cycle) and "
	       "the collector\n");
	/* ptrs is sorted by (method_ptr, time): a pointer named again for another method is
	 * metadata a later class reused after the first one unloaded (the same pair twice is
	 * a class both enumerated at start and prepared). */
	size_t reused = 0;
	for (size_t i = 1; i < m->nptrs; i++)
		reused += m->ptrs[i].method_ptr == m->ptrs[i - 1].method_ptr &&
			  m->ptrs[i].method_id != m->ptrs[i - 1].method_id;
	printf("%zu Method* entries (METHOD_PTR), %zu of them a reused Method*; %zu method names\n", m->nptrs,
	       reused, m->nnames);
	/* Full Java thread names (THREAD_NAME), by tid and time. */
	for (size_t i = 0; i < m->nthreads; i++) {
		const struct vp_cm_thread_info *t = &m->threads[i];
		printf("thread %u at %.3f s: %s%s\n", t->tid, rel(m, t->time),
		       t->flags & VP_CM_THREAD_ENDED ? "(ended)" : t->name,
		       t->flags & VP_CM_THREAD_PREEXISTING ? " (running before the agent)" : "");
	}
	return 0;
}

static int parse_epoch(const struct vp_codemap *m, const char *s, size_t *out)
{
	char *end;
	unsigned long e = strtoul(s, &end, 10);
	if (*end || end == s || e >= m->nepochs) {
		fprintf(stderr, "viprof maps: no epoch '%s'; 'list' shows epochs 0..%zu\n", s, m->nepochs ? m->nepochs - 1 : 0);
		return -EINVAL;
	}
	*out = e;
	return 0;
}

/* The compile tier of x for 'show' and 'lookup', followed by ", ": "C1 level 3, ",
 * "C2 level 4 OSR, ", "level 0, " (a native wrapper); "" when the map does not say. */
static const char *tier_text(const struct vp_cm_method_info *x, char *buf, size_t len)
{
	if (x->level == VP_CM_LEVEL_UNKNOWN) {
		buf[0] = '\0';
		return buf;
	}
	const char *c = x->level >= 1 && x->level <= 3 ? "C1 " : x->level == VP_CM_LEVEL_C2 ? "C2 " : "";
	snprintf(buf, len, "%slevel %u%s, ", c, x->level, x->flags & VP_CM_LOAD_OSR ? " OSR" : "");
	return buf;
}

static int cmd_show(const struct vp_codemap *m, size_t e)
{
	const struct vp_cm_epoch_info *ep = &m->epochs[e];
	/* METHOD_PTR entries timed inside this epoch: classes prepared (or enumerated) then. */
	uint64_t end = e + 1 < m->nepochs ? m->epochs[e + 1].t_begin : UINT64_MAX;
	size_t nptrs = 0;
	for (size_t i = 0; i < m->nptrs; i++)
		nptrs += (e == 0 || m->ptrs[i].time >= ep->t_begin) && m->ptrs[i].time < end;
	char gb[64], ge[64];
	vp_codemap__gc_text(m, e, gb, sizeof(gb));
	vp_codemap__gc_text(m, e + 1, ge, sizeof(ge));
	printf("epoch %zu (%s%s%s) from %.3f s: %u methods loaded, %zu Method* entries (METHOD_PTR)\n", e,
	       vp_cm_reason_name(ep->reason), gb[0] ? ": " : "", gb, rel(m, ep->t_begin), ep->nloads, nptrs);
	if (e + 1 < m->nepochs && ge[0] && m->epochs[e + 1].gc_count > 1)
		printf("ended at %.3f s by %s, the last of %u GCs in it (the earlier ones came before any code changed)\n",
		       rel(m, m->epochs[e + 1].t_begin), ge, m->epochs[e + 1].gc_count);
	else if (e + 1 < m->nepochs)
		printf("ended at %.3f s by %s\n", rel(m, m->epochs[e + 1].t_begin),
		       ge[0] ? ge : vp_cm_reason_name(m->epochs[e + 1].reason));
	for (uint32_t i = 0; i < ep->nloads; i++) {
		const struct vp_cm_method_info *x = &m->methods[ep->by_addr[i]];
		char tier[48];
		printf("%#" PRIx64 "-%#" PRIx64 " %6u  %s  (%sloaded %.3f s", x->start, x->start + x->size, x->size,
		       x->name, tier_text(x, tier, sizeof(tier)), rel(m, x->load_time));
		if (x->unload_time != VP_CM_NEVER)
			printf(", unloaded %.3f s", rel(m, x->unload_time));
		printf(")\n");
	}
	return 0;
}

/* Is method x live (loaded, not yet unloaded) at the end of epoch e? */
static bool live_at_end(const struct vp_codemap *m, const struct vp_cm_method_info *x, size_t e)
{
	if (x->epoch > e)
		return false;
	if (x->unload_time == VP_CM_NEVER)
		return true;
	const struct vp_cm_epoch_info *ep = &m->epochs[e];
	uint64_t end = ep->ended ? ep->t_end : (e + 1 < m->nepochs ? m->epochs[e + 1].t_begin : VP_CM_NEVER);
	return x->unload_time > end;
}

/* Every compiled copy of the methods whose name contains what: where and when each
 * lived, and whether other code took its place later. */
static int cmd_lookup_name(const struct vp_codemap *m, const char *what)
{
	size_t found = 0;
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		if (!strstr(x->name, what))
			continue;
		found++;
		printf("%#" PRIx64 "-%#" PRIx64 " %6u  %s  epoch %u, loaded %.3f s", x->start, x->start + x->size, x->size,
		       x->name, x->epoch, rel(m, x->load_time));
		if (x->unload_time != VP_CM_NEVER)
			printf(", unloaded %.3f s", rel(m, x->unload_time));
		size_t later = 0;
		for (size_t j = 0; j < m->nmethods; j++) {
			const struct vp_cm_method_info *y = &m->methods[j];
			later += y->epoch > x->epoch && y->start < x->start + x->size && x->start < y->start + y->size &&
				 strcmp(y->name, x->name);
		}
		if (later)
			printf("; its addresses later held %zu other method%s", later, later == 1 ? "" : "s");
		printf("\n");
	}
	if (!found) {
		fprintf(stderr, "viprof maps: no compiled method's name contains '%s' (give an address such as "
			"0x7f3a8c0123a0, or part of a name such as 'HashMap.get')\n", what);
		return 1;
	}
	return 0;
}

/* One method's compiled code in one column of the timeline. */
enum { TL_NONE, TL_LIVE, TL_NEW, TL_MOVED, TL_REUSED };
static const char tl_mark[] = " -NMR";

struct tl_row {
	const char *name;
	uint8_t *cells;              /* one per column */
	size_t gens;                 /* compiled copies seen */
	bool interesting;            /* moved or reused somewhere */
	uint64_t first;              /* first load time, for the order */
};

static int tl_cmp(const void *a, const void *b)
{
	const struct tl_row *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

static int tl_by_name(const void *a, const void *b, void *ctx)
{
	const struct vp_codemap *m = ctx;
	const struct vp_cm_method_info *x = &m->methods[*(const size_t *)a], *y = &m->methods[*(const size_t *)b];
	int c = strcmp(x->name, y->name);
	return c ? c : x->load_time < y->load_time ? -1 : x->load_time > y->load_time;
}

/* Whether another method's code occupied x's addresses in an epoch before x's: what a
 * flat map (perf-PID.map) gets wrong, and epochs get right. by_start: every method's
 * index, sorted by start. */
static bool tl_reused(const struct vp_codemap *m, const size_t *by_start, const struct vp_cm_method_info *x)
{
	/* Code of at most 16 MiB per method: look back that far among the starts. */
	size_t lo = 0, hi = m->nmethods;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->methods[by_start[mid]].start < x->start + x->size)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo-- > 0) {
		const struct vp_cm_method_info *y = &m->methods[by_start[lo]];
		if (y->start + (1u << 24) < x->start)
			break;
		if (y->start + y->size > x->start && y->epoch < x->epoch && strcmp(y->name, x->name))
			return true;
	}
	return false;
}

static int start_cmp(const void *a, const void *b, void *ctx)
{
	const struct vp_codemap *m = ctx;
	uint64_t x = m->methods[*(const size_t *)a].start, y = m->methods[*(const size_t *)b].start;
	return x < y ? -1 : x > y;
}

/* Methods as rows, epochs as columns (grouped when there are more than fit): where each
 * method's code was live, when it was compiled anew (N), moved to other addresses (M),
 * or placed where another method's code had been in an earlier epoch (R). */
static int cmd_timeline(const struct vp_codemap *m, bool all)
{
	size_t ncols = m->nepochs < 72 ? m->nepochs : 72, per = ncols ? (m->nepochs + ncols - 1) / ncols : 1;
	size_t *order = malloc(m->nmethods * sizeof(*order)), *by_start = malloc(m->nmethods * sizeof(*by_start));
	struct tl_row *rows = calloc(m->nmethods ? m->nmethods : 1, sizeof(*rows));
	size_t nrows = 0, reused_gens = 0, moved_gens = 0, gens = 0;
	int ret = 0;

	if (!ncols) {
		printf("no epochs: the map holds no code\n");
		goto cleanup;
	}
	ncols = (m->nepochs + per - 1) / per;
	if (!order || !by_start || !rows) {
		fprintf(stderr, "viprof maps: out of memory\n");
		ret = 1;
		goto cleanup;
	}
	for (size_t i = 0; i < m->nmethods; i++)
		order[i] = by_start[i] = i;
	qsort_r(order, m->nmethods, sizeof(*order), tl_by_name, (void *)m);
	qsort_r(by_start, m->nmethods, sizeof(*by_start), start_cmp, (void *)m);
	for (size_t i = 0; i < m->nmethods;) {
		struct tl_row *r = &rows[nrows++];
		const struct vp_cm_method_info *x = &m->methods[order[i]];
		r->name = x->name;
		r->first = x->load_time;
		r->cells = calloc(ncols, 1);
		if (!r->cells) {
			ret = 1;
			goto cleanup;
		}
		uint64_t prev_start = 0;
		uint32_t prev_epoch = 0;
		for (; i < m->nmethods && !strcmp(m->methods[order[i]].name, r->name); i++) {
			x = &m->methods[order[i]];
			r->gens++;
			gens++;
			/* A copy compiled again in the same epoch is a tier-up (N); in a later
			 * epoch at other addresses, the method's code moved (M). */
			uint8_t mark = r->gens > 1 && x->epoch > prev_epoch && x->start != prev_start ? TL_MOVED : TL_NEW;
			prev_epoch = x->epoch;
			if (tl_reused(m, by_start, x)) {
				mark = TL_REUSED;
				reused_gens++;
			} else if (mark == TL_MOVED) {
				moved_gens++;
			}
			prev_start = x->start;
			for (size_t e = x->epoch; e < m->nepochs && live_at_end(m, x, e); e++) {
				uint8_t *c = &r->cells[e / per];
				uint8_t want = e == x->epoch ? mark : TL_LIVE;
				if (want > *c)
					*c = want;
			}
			if (x->epoch < m->nepochs && r->cells[x->epoch / per] < mark)
				r->cells[x->epoch / per] = mark;   /* loaded and unloaded inside one epoch */
			r->interesting |= mark == TL_MOVED || mark == TL_REUSED;
		}
	}
	qsort(rows, nrows, sizeof(*rows), tl_cmp);
	printf("pid %u: %zu epochs, %zu methods, %zu compiled copies; %zu copies moved to new addresses in a later "
	       "epoch, %zu placed where another method's code had been (a flat map such as perf-PID.map names those "
	       "wrong)\n", m->pid, m->nepochs, nrows, gens, moved_gens, reused_gens);
	if (per > 1)
		printf("each column is %zu epochs; ", per);
	printf("N compiled, M moved, R address reused, - live%s\n", all ? "" : "; methods that moved or were placed "
	       "over other code only (--all for every one)");
	printf("%-*s ", 48, "epoch");
	for (size_t c = 0; c < ncols; c++)
		putchar(c % 10 == 0 ? '|' : ' ');
	printf("\n%-*s ", 48, "");
	for (size_t c = 0; c < ncols; c++)
		putchar((int)'0' + (int)((c * per / 10) % 10 == 0 && c % 10 == 0 ? (c * per) / 10 % 10 : (c * per) % 10));
	putchar('\n');
	/* Which GC closed each column's (last) epoch: Y young, F full, C a pause of a concurrent
	 * cycle, G a GC the map does not describe; R reuse. */
	bool any_gc = false;
	for (size_t e = 1; e < m->nepochs; e++)
		any_gc |= m->epochs[e].gc_known;
	if (any_gc) {
		printf("%-48s ", "ended by GC (Y young, F full, C concurrent)");
		for (size_t c = 0; c < ncols; c++) {
			size_t e = (c + 1) * per;   /* the epoch after the column's last */
			const struct vp_cm_epoch_info *n = e < m->nepochs ? &m->epochs[e] : NULL;
			putchar(!n ? ' ' : n->reason != VP_EPOCH_GC ? (n->reason == VP_EPOCH_REUSE ? 'R' : '.')
				: !n->gc_known ? 'G' : "GYFC"[n->gc_kind <= VP_GC_CONCURRENT ? n->gc_kind : 0]);
		}
		putchar('\n');
	}
	for (size_t i = 0; i < nrows; i++) {
		if (!all && !rows[i].interesting)
			continue;
		char nm[64];
		size_t l = strlen(rows[i].name);
		snprintf(nm, sizeof(nm), "%s%s", l > 48 ? "..." : "", l > 48 ? rows[i].name + l - 45 : rows[i].name);
		printf("%-48s ", nm);
		for (size_t c = 0; c < ncols; c++)
			putchar(tl_mark[rows[i].cells[c]]);
		putchar('\n');
	}
cleanup:
	for (size_t i = 0; i < nrows; i++)
		free(rows[i].cells);
	free(rows);
	free(order);
	free(by_start);
	return ret;
}

static int cmd_diff(const struct vp_codemap *m, size_t a, size_t b)
{
	size_t loaded = 0, unloaded = 0, reused = 0;
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		bool la = live_at_end(m, x, a), lb = live_at_end(m, x, b);
		if (la && !lb) {
			printf("- %#" PRIx64 " %6u %s\n", x->start, x->size, x->name);
			unloaded++;
		} else if (!la && lb) {
			printf("+ %#" PRIx64 " %6u %s\n", x->start, x->size, x->name);
			loaded++;
		}
	}
	/* Reused: a range live after A now holds different code after B. */
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		if (!live_at_end(m, x, a) || live_at_end(m, x, b))
			continue;
		for (size_t j = 0; j < m->nmethods; j++) {
			const struct vp_cm_method_info *y = &m->methods[j];
			if (j == i || live_at_end(m, y, a) || !live_at_end(m, y, b))
				continue;
			if (y->start < x->start + x->size && x->start < y->start + y->size) {
				printf("~ %#" PRIx64 "-%#" PRIx64 " %s -> %#" PRIx64 "-%#" PRIx64 " %s\n", x->start,
				       x->start + x->size, x->name, y->start, y->start + y->size, y->name);
				reused++;
			}
		}
	}
	printf("epoch %zu -> %zu: %zu loaded, %zu unloaded, %zu reused ranges\n", a, b, loaded, unloaded, reused);
	return 0;
}

static void print_frames(struct vp_jit_frame *f, int n)
{
	for (int i = 0; i < n; i++) {
		printf("%s%s", i ? " <- " : "", f[i].name);
		if (f[i].line)
			printf(" (%s:%u)", f[i].file, f[i].line);
	}
	printf("%s\n", n ? "" : "(nothing)");
}

static int cmd_lookup(struct vp_jit_index *xi, const struct vp_codemap *m, uint64_t addr, const char *at)
{
	struct vp_jit_frame f[64];
	if (at) {
		char *end;
		double s = strtod(at, &end);
		if (*end || end == at) {
			fprintf(stderr, "viprof maps: --at wants seconds since the map began, e.g. --at 2.5\n");
			return 2;
		}
		uint64_t t = time_base + (uint64_t)(s * 1e9);
		printf("at %.3f s (epoch %zu): ", s, vp_codemap__epoch_at(m, t));
		print_frames(f, vp_jit_index__resolve(xi, addr, t, false, f, 64));
		printf("flat map (perf-PID.map) says: ");
		print_frames(f, vp_jit_index__resolve(xi, addr, t, true, f, 64));
	} else {
		for (size_t e = 0; e < m->nepochs; e++) {
			/* An epoch is [t_begin, end) and the next one begins at its end, so the
			 * end itself already resolves in the next epoch: ask for the last
			 * instant inside this one. An epoch that never ended runs to the end
			 * of the map. */
			const struct vp_cm_epoch_info *ep = &m->epochs[e];
			uint64_t end = e + 1 < m->nepochs ? m->epochs[e + 1].t_begin : UINT64_MAX;
			if (ep->ended && ep->t_end < end)
				end = ep->t_end;
			uint64_t t = end > ep->t_begin ? end - 1 : ep->t_begin;
			if (end == UINT64_MAX)
				printf("epoch %zu (still open): ", e);
			else
				printf("epoch %zu (end %.3f s): ", e, rel(m, end));
			print_frames(f, vp_jit_index__resolve(xi, addr, t, false, f, 64));
		}
	}
	printf("history of %#" PRIx64 ":\n", addr);
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		if (addr < x->start || addr >= x->start + (x->size ? x->size : 1))
			continue;
		char tier[48];
		printf("  epoch %u: %s (%sloaded %.3f s", x->epoch, x->name, tier_text(x, tier, sizeof(tier)),
		       rel(m, x->load_time));
		if (x->unload_time != VP_CM_NEVER)
			printf(", unloaded %.3f s", rel(m, x->unload_time));
		printf(")\n");
	}
	const struct vp_cm_blob_info *b = vp_codemap__blob(m, addr);
	if (b)
		printf("  stub: %s (%#" PRIx64 ", %u bytes)\n", b->name, b->start, b->size);
	return 0;
}

/* The export's file, as sessions are made: created new (O_EXCL, 0600, no symlink
 * followed), so that viprof run as root neither writes a file someone else planted nor
 * blocks on a FIFO. With --force an existing regular file of the caller's (real uid)
 * is emptied and written; anything else is refused. The fd, or -errno (said on stderr). */
static int open_export(const char *path, bool force)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		fchmod(fd, 0600);   /* whatever the umask */
		return fd;
	}
	int e = errno;
	if (e != EEXIST) {
		fprintf(stderr, "viprof maps: cannot create %s: %s; pick a writable path\n", path, strerror(e));
		return -e;
	}
	if (!force) {
		fprintf(stderr, "viprof maps: %s exists; give a new name, or --force to replace a regular file you own\n",
			path);
		return -EEXIST;
	}
	/* O_NONBLOCK: opening a FIFO for writing never waits for a reader. */
	struct stat st;
	fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	/* One name only: a second one in a sticky directory is another file's (a user
	 * can link root's files where fs.protected_hardlinks is off). */
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || st.st_nlink != 1) {
		e = fd < 0 ? errno : EPERM;
		fprintf(stderr, "viprof maps: --force %s: %s; it replaces only a regular file you own (uid %u) with no "
			"other name\n", path,
			fd < 0 ? strerror(e) : !S_ISREG(st.st_mode) ? "not a regular file" :
			st.st_uid != getuid() ? "owned by another user" : "it has other names (hard links)",
			(unsigned)getuid());
		if (fd >= 0)
			close(fd);
		return -e;
	}
	if (ftruncate(fd, 0) != 0 || fcntl(fd, F_SETFL, 0) != 0) {
		e = errno;
		fprintf(stderr, "viprof maps: cannot empty %s: %s\n", path, strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

int cmd_maps(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "at", required_argument, NULL, 't' },
		{ "perf-map", required_argument, NULL, 'm' },
		{ "jitdump", required_argument, NULL, 'j' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	long pid = 0;
	const char *at = NULL, *perf_map = NULL, *jitdump = NULL;
	bool force = false, all = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *end;
			pid = strtol(optarg, &end, 10);
			if (*end || pid <= 0) {
				fprintf(stderr, "viprof maps: --pid wants a process id, got '%s'\n", optarg);
				return 2;
			}
			break;
		}
		case 't': at = optarg; break;
		case 'm': perf_map = optarg; break;
		case 'j': jitdump = optarg; break;
		case 'f': force = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	/* Positional: [DIR] COMMAND ARGS, with --at allowed after lookup's ADDR. */
	char *pos[8];
	int npos = 0;
	for (int i = optind; i < argc; i++) {
		if (!strcmp(argv[i], "--at") && i + 1 < argc) {
			at = argv[++i];
			continue;
		}
		if (!strcmp(argv[i], "--force")) {
			force = true;
			continue;
		}
		if (!strcmp(argv[i], "--all")) {
			all = true;
			continue;
		}
		if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
			pid = strtol(argv[++i], NULL, 10);
			continue;
		}
		if (npos < 8)
			pos[npos++] = argv[i];
	}
	static const char *cmds[] = { "list", "show", "diff", "lookup", "timeline", "export-perf-map", "export-jitdump" };
	int ci = -1;
	const char *dir = ".";
	for (int k = 0; k < 2 && k < npos && ci < 0; k++) {
		for (size_t j = 0; j < sizeof(cmds) / sizeof(cmds[0]); j++)
			if (!strcmp(pos[k], cmds[j]))
				ci = k;
	}
	if (ci < 0) {
		/* A word where the command goes is a command we do not know, not a missing
		 * one: "maps SESSION bogus" names bogus (the first word may be DIR). */
		struct stat st;
		const char *word = npos >= 2 && !stat(pos[0], &st) && S_ISDIR(st.st_mode) ? pos[1]
				   : npos == 1 && (stat(pos[0], &st) || !S_ISDIR(st.st_mode)) ? pos[0] : NULL;
		if (word)
			fprintf(stderr, "viprof maps: unknown command '%s'; use list, show, diff, lookup, timeline, "
				"export-perf-map or export-jitdump\n", word);
		else
			fprintf(stderr, "viprof maps: missing command (list, show, diff, lookup, timeline, export-perf-map, "
				"export-jitdump)\n");
		usage(stderr);
		return 2;
	}
	if (ci == 1)
		dir = pos[0];
	const char *cmd = pos[ci];
	char **args = pos + ci + 1;
	int nargs = npos - ci - 1;
	int need = !strcmp(cmd, "list") || !strcmp(cmd, "timeline") ? 0 : !strcmp(cmd, "diff") ? 2 : 1;
	if (nargs != need) {
		fprintf(stderr, "viprof maps: '%s' takes %d argument%s\n", cmd, need, need == 1 ? "" : "s");
		return 2;
	}

	char err[512] = "", pdir[PATH_MAX + 512];
	struct vp_jit_index *xi;
	if (perf_map)
		xi = vp_jit_index__open_perf_map(perf_map, err, sizeof(err));
	else if (jitdump)
		xi = vp_jit_index__open_jitdump(jitdump, err, sizeof(err));
	else if (find_pid_dir(dir, pid, pdir, sizeof(pdir)))
		return 1;
	else
		xi = vp_jit_index__open(pdir, err, sizeof(err));
	if (!xi) {
		fprintf(stderr, "viprof maps: %s\n", err);
		return 1;
	}
	const struct vp_codemap *m = vp_jit_index__codemap(xi);
	set_time_base(m, perf_map || jitdump ? "/nonexistent" : dir);
	int ret = 0;
	size_t a, b;
	/* Whatever the command, what was read is used and one line says what was not. */
	if (m->damage[0])
		fprintf(stderr, "viprof maps: warning: %s\n", m->damage);
	if (!strcmp(cmd, "list")) {
		ret = cmd_list(m);
	} else if (!strcmp(cmd, "timeline")) {
		ret = cmd_timeline(m, all);
	} else if (!strcmp(cmd, "show")) {
		ret = parse_epoch(m, args[0], &a) ? 2 : cmd_show(m, a);
	} else if (!strcmp(cmd, "diff")) {
		ret = parse_epoch(m, args[0], &a) || parse_epoch(m, args[1], &b) ? 2 : cmd_diff(m, a, b);
	} else if (!strcmp(cmd, "lookup")) {
		char *end;
		uint64_t addr = strtoull(args[0], &end, 0);
		if (*end || end == args[0]) {
			ret = cmd_lookup_name(m, args[0]);
		} else {
			ret = cmd_lookup(xi, m, addr, at);
		}
	} else {
		bool perf = !strcmp(cmd, "export-perf-map");
		int fd = open_export(args[0], force);
		int e = fd < 0 ? fd : perf ? vp_codemap__export_perf_map_fd(m, fd) : vp_codemap__export_jitdump_fd(m, fd);
		if (fd < 0) {
			ret = 1;   /* open_export said why */
		} else if (e) {
			fprintf(stderr, "viprof maps: writing %s failed: %s; pick a writable path\n", args[0], strerror(-e));
			ret = 1;
		} else {
			printf("wrote %s (%zu methods)\n", args[0], m->nmethods);
		}
	}
	vp_jit_index__close(xi);
	return ret;
}
