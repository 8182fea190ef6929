/* The text report: a header with the session's facts, a per-layer summary, and a
 * hotspot table (or, with a base profile, the change per frame).
 *
 * Percentages count samples (not periods) of each event. The table's self% column
 * plus its "(other)" row adds up to exactly 100.0 as printed: rows are rounded to the
 * nearest tenth and (other) absorbs the rest, or, when that cannot work, the column
 * is shared out with the largest-remainder method (so 58.33 may then show as 58.4).
 * total% counts a frame once per stack however often it recurs there. The per-layer
 * summary is always printed, above the table.
 *
 * Steal time (the event "steal", postproc/session_steal.c) is time the hypervisor took from
 * the VM's vCPUs; it is no sample of the ranked event, so the layer summary adds it as
 * its own "hypervisor (steal)" line in milliseconds, as a percentage of the sampled
 * time of the first time-based event (cpu-clock); the hotspot table gives steal a
 * column only when it is the ranked event (--event steal), because its leaves are
 * never frames of the other events. A recording that measured steal and
 * found none gets one note saying so. With cycles and instructions both recorded the
 * header shows their ratio, IPC. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/session_format.h"
#include "common/util.h"
#include "common/steal_clock.h"
#include "postproc/calltree.h"
#include "report/report.h"
#include "report/report_util.h"

#define DEFAULT_TOP 25
#define MAX_COLS 8

static const char *layer_color(int layer)
{
	switch (layer) {
	case VP_LAYER_HYPERVISOR: return "\033[1;31m";
	case VP_LAYER_KERNEL: return "\033[31m";
	case VP_LAYER_NATIVE: return "\033[33m";
	case VP_LAYER_JVM: return "\033[35m";
	case VP_LAYER_JIT: return "\033[32m";
	case VP_LAYER_INLINED: return "\033[36m";
	case VP_LAYER_INTERPRETED: return "\033[34m";
	default: return "";
	}
}

static const char *base_name(const char *path)
{
	if (!path || !*path)
		return "";
	if (!strcmp(path, "[kernel.kallsyms]"))  /* the longest image name, and the most common */
		return "[kernel]";
	if (path[0] == '[')
		return path;
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Copies s into buf fitting w columns: cut at the end with "..." (symbols keep their
 * start, which names them) or in the middle (images keep their distinctive tail). */
static const char *fit(const char *s, int w, bool middle, char *buf, size_t len)
{
	int l = (int)strlen(s);
	if (l <= w || w < 4 || (size_t)w >= len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	if (!middle) {
		snprintf(buf, len, "%.*s...", w - 3, s);
	} else {
		int head = (w - 3) / 2, tail = w - 3 - head;
		snprintf(buf, len, "%.*s...%s", head, s, s + l - tail);
	}
	return buf;
}

/* Rounds counts[i]/total to tenths of a percent so that they add up to 1000 exactly
 * (largest remainder, in integers so that ties break the same way everywhere: the
 * earlier row wins). counts must sum to total. */
static void round_tenths(const uint64_t *counts, size_t n, uint64_t total, int64_t *tenths)
{
	memset(tenths, 0, n * sizeof(*tenths));
	if (!total)
		return;
	int64_t sum = 0;
	uint64_t *rem = malloc((n ? n : 1) * sizeof(*rem));
	for (size_t i = 0; i < n; i++) {
		tenths[i] = (int64_t)(counts[i] * 1000 / total);
		sum += tenths[i];
		if (rem)
			rem[i] = counts[i] * 1000 % total;
	}
	while (sum < 1000 && rem) {  /* hand out the missing tenths, biggest remainder first */
		size_t best = 0;
		for (size_t i = 1; i < n; i++)
			if (rem[i] > rem[best])
				best = i;
		if (!rem[best])
			break;
		tenths[best]++;
		rem[best] = 0;
		sum++;
	}
	free(rem);
}

/* The table's self% column: rows rounded to the nearest tenth and the (other) row
 * taking what is left, so that each row shows its own value; only when that cannot
 * add up (nothing left to absorb the rounding, or more rounded up than remains) is
 * the whole column shared out by largest remainder. counts[n] is the (other) count. */
static void round_column(const uint64_t *counts, size_t n, uint64_t total, int64_t *tenths)
{
	int64_t sum = 0;
	for (size_t i = 0; total && i < n; i++) {
		tenths[i] = (int64_t)((counts[i] * 1000 + total / 2) / total);
		sum += tenths[i];
	}
	tenths[n] = total ? 1000 - sum : 0;
	if (total && (tenths[n] < 0 || (tenths[n] != 0) != (counts[n] != 0)))
		round_tenths(counts, n + 1, total, tenths);
}

static void print_tenths(struct vp_out *o, int64_t t, int w)
{
	vp_out__printf(o, "%*lld.%lld", w - 2, (long long)(t / 10), (long long)(t % 10));
}

static int find_event(const struct vp_profile *p, const char *name)
{
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, name))
			return e;
	return -1;
}

/* Instructions per cycle over the sampled stacks: both sums of periods are estimates
 * of the counts, so their ratio is the IPC of what was profiled, provided the two were
 * scheduled together (one group). When the PMU could not group them, each was
 * multiplexed on its own and the ratio would mix two independent estimates: not shown. */
static void ratios(const struct vp_profile *p, struct vp_out *o)
{
	int c = find_event(p, "cycles"), i = find_event(p, "instructions");
	if (c < 0 || i < 0)
		return;
	if (vp_profile__meta(p, "ungrouped.cycles") || vp_profile__meta(p, "ungrouped.instructions")) {
		vp_out__puts(o, "# IPC not shown: the PMU could not group cycles and instructions, so each was "
				"multiplexed on its own and their ratio would mix two estimates\n");
		return;
	}
	uint64_t cw = vp_event_weight(p, c), iw = vp_event_weight(p, i);
	if (cw)
		vp_out__printf(o, "# IPC %.2f (instructions / cycles)\n", (double)iw / (double)cw);
	else
		vp_out__puts(o, "# IPC n/a (no cycles sampled)\n");
}

static void steal_note(const struct vp_profile *p, struct vp_out *o)
{
	const char *t = vp_profile__meta(p, "steal.total");
	const char *ch = vp_profile__meta(p, "sched_steal.charged_ns"), *id = vp_profile__meta(p, "sched_steal.idle_ns");
	const char *kn = vp_profile__meta(p, "sched_steal.kernel_ns");
	/* No steal clock ran: steal is unknown, and saying 0 would say the hypervisor took
	 * nothing (common/steal_clock.h has the one wording). */
	if (vp_profile__steal_unmeasured(p)) {
		char why[512];
		vp_steal_clock__why(why, sizeof(why));
		vp_out__printf(o, "# %s\n", why);
		return;
	}
	/* Steal measured at every context switch (the switch tracer, docs/offcpu.md), with
	 * the kernel's and /proc/stat's accounts beside it as the cross-check. */
	if (ch)
		vp_out__printf(o, "# steal: %.3f ms measured at context switches on all vCPUs (%.3f ms of it idle); "
			       "kernel-accounted %.3f ms; /proc/stat %s%.1f ms (10 ms ticks)\n",
			       strtod(ch, NULL) / 1e6, id ? strtod(id, NULL) / 1e6 : 0.0, kn ? strtod(kn, NULL) / 1e6 : 0.0,
			       t ? "" : "n/a ", t ? strtod(t, NULL) / 1e6 : 0.0);
	else if (t && strtoull(t, NULL, 10) == 0)
		vp_out__puts(o, "# steal: 0 ns on all vCPUs during the recording: the hypervisor took no time from this VM\n");
}

/* How the user stacks ended: whole (root) or cut short, and why. */
static void stack_ends(const struct vp_profile *p, struct vp_out *o)
{
	uint64_t n[VP_WALK__COUNT] = { 0 }, total = 0;
	static const char *const label[VP_WALK__COUNT] = {
		[VP_WALK_UNKNOWN] = "not recorded (frame-pointer walk)", [VP_WALK_ROOT] = "whole (reached the root)",
		[VP_WALK_NO_RULE] = "no unwind rule", [VP_WALK_UNREADABLE] = "stack unreadable",
		[VP_WALK_DEPTH] = "depth limit", [VP_WALK_BAD_FRAME] = "bad frame",
		[VP_WALK_NO_PROC] = "tables not loaded yet",
	};
	for (int k = 0; k < VP_WALK__COUNT; k++) {
		char key[48];
		const char *v;

		snprintf(key, sizeof(key), "stack_end.%s", vp_walk_end_name(k));
		if ((v = vp_profile__meta(p, key)))
			total += n[k] = strtoull(v, NULL, 10);
	}
	/* Without -g there are no stacks to speak of (older sessions lack the key). */
	const char *cc = vp_profile__meta(p, "callchain");
	if (!total || (cc && !strcmp(cc, "no")))
		return;
	vp_out__printf(o, "# user stacks: %llu;", (unsigned long long)total);
	for (int k = 0; k < VP_WALK__COUNT; k++)
		if (n[k])
			vp_out__printf(o, " %s %.1f%%;", label[k], 100.0 * (double)n[k] / (double)total);
	vp_out__puts(o, "\n");
}

/* What the GC-epoch code maps did for this profile: how many samples in JIT code a
 * flat map (perf-PID.map) would have named after another method. */
static void jit_epochs(const struct vp_profile *p, struct vp_out *o)
{
	const char *n = vp_profile__meta(p, "jit.leaf_samples"), *w = vp_profile__meta(p, "jit.flat_misnamed");
	uint64_t leaves = n ? strtoull(n, NULL, 10) : 0, wrong = w ? strtoull(w, NULL, 10) : 0;
	if (!leaves)
		return;
	vp_out__printf(o, "# jit: %llu samples in compiled Java code; a flat map (perf-PID.map) would have named %llu "
		       "(%.1f%%) of them after another method (code reused across GC epochs)\n",
		       (unsigned long long)leaves, (unsigned long long)wrong, 100.0 * (double)wrong / (double)leaves);
}

static void header(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	if (opts->title)
		vp_out__printf(o, "# %s\n", opts->title);
	for (int e = 0; e < p->nevents; e++) {
		if (!strcmp(p->events[e].name, "steal") && vp_profile__steal_unmeasured(p)) {
			vp_out__puts(o, "# event: " VP_STEAL_NOT_MEASURED "\n");
			continue;
		}
		vp_out__printf(o, "# event: %s (%s), %llu samples", p->events[e].name, p->events[e].unit,
			       (unsigned long long)vp_event_samples(p, e));
		/* Time measured at context switches: its "samples" are periods of the
		 * sampling clock; the time is what it means. */
		if (vp_event_measured(p, e))
			vp_out__printf(o, " = %.1f ms (time measured at context switches; columns in ms)",
				       (double)vp_event_weight(p, e) / 1e6);
		/* Never called measured: the host's share guessed from the guest's clocks. */
		else if (vp_event_estimated(p, e))
			vp_out__printf(o, " = %.1f ms (estimated, not measured: sampler timers that fired late while "
				       "the host had the vCPU; columns in ms)", (double)vp_event_weight(p, e) / 1e6);
		/* A counting event sampled by frequency stands for more events than samples
		 * (the kernel's period is above 1 at times: context-switches at -F, 2-6% fewer
		 * samples than perf stat's count): its count is the weight, said here so that
		 * nobody compares the samples with a count (issue 34 item 4). */
		else if (!strcmp(p->events[e].unit, "events") && vp_event_weight(p, e) != vp_event_samples(p, e))
			vp_out__printf(o, " weighing %llu events", (unsigned long long)vp_event_weight(p, e));
		vp_out__puts(o, "\n");
	}
	for (int e = 0; e < p->nevents; e++) {
		char key[96];
		const char *t, *c;
		snprintf(key, sizeof(key), "tail.%s", p->events[e].name);
		if (!(t = vp_profile__meta(p, key)))
			continue;
		snprintf(key, sizeof(key), "count.%s", p->events[e].name);
		c = vp_profile__meta(p, key);
		uint64_t tv = strtoull(t, NULL, 10), cv = c ? strtoull(c, NULL, 10) : 0;
		vp_out__printf(o, "# %s: %llu events (%.1f%% of %llu counted) came after their thread's last sample: "
			       "charged to that sample's stack\n", p->events[e].name, (unsigned long long)tv,
			       cv ? 100.0 * (double)tv / (double)cv : 0.0, (unsigned long long)cv);
	}
	for (int e = 0; e < p->nevents; e++) {
		char key[96];
		const char *u, *c;
		snprintf(key, sizeof(key), "unsampled.%s", p->events[e].name);
		if (!(u = vp_profile__meta(p, key)))
			continue;
		snprintf(key, sizeof(key), "count.%s", p->events[e].name);
		c = vp_profile__meta(p, key);
		uint64_t uv = strtoull(u, NULL, 10), cv = c ? strtoull(c, NULL, 10) : 0;
		vp_out__printf(o, "# %s: %.1f%% of the %llu counted are in no sample: what each thread counted after its "
			       "last sample (under one sampling period per thread); percentages are of the sampled part\n",
			       p->events[e].name, cv ? 100.0 * (double)uv / (double)cv : 0.0, (unsigned long long)cv);
	}
	vp_out__printf(o, "# lost: %llu%s\n", (unsigned long long)p->lost,
		       p->incomplete ? " (session incomplete)" : "");
	const char *d = vp_profile__meta(p, "duration_ns");
	if (d)
		vp_out__printf(o, "# duration: %.3f s\n", strtod(d, NULL) / 1e9);
	const char *z = vp_profile__meta(p, "time_zero"), *zn = vp_profile__meta(p, "time_zero_monotonic_ns");
	if (z && zn)
		vp_out__printf(o, "# time zero: %s%s%s%s; --time, the HTML time strip and viprof maps count seconds from it\n",
			       z, *zn ? ", CLOCK_MONOTONIC " : "", zn, *zn ? " ns" : "");
	ratios(p, o);
	steal_note(p, o);
	static const char *const keys[] = { "backend", "hypervisor", "pmu.device", "pmu.hw_sampling",
					    "default_event.why", "kernel" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = vp_profile__meta(p, keys[i]);
		/* The recorder keeps the probe's keys apart ("probe.hypervisor"). */
		char pk[64];
		snprintf(pk, sizeof(pk), "probe.%s", keys[i]);
		if (!v || !*v)
			v = vp_profile__meta(p, pk);
		if (v && *v)
			vp_out__printf(o, "# %s: %s\n", keys[i], v);
	}
	stack_ends(p, o);
	jit_epochs(p, o);
	if (p->warnings) {
		const char *s = p->warnings;
		while (*s) {
			const char *nl = strchr(s, '\n');
			int n = nl ? (int)(nl - s) : (int)strlen(s);
			if (n)
				vp_out__printf(o, "# warning: %.*s\n", n, s);
			s += n + (nl ? 1 : 0);
		}
	}
}

/* Samples per container (event ev), largest first, when any process is in one: the
 * whole VM's profile split by container. "host" holds the processes in none. */
static void container_summary(const struct vp_profile *p, struct vp_out *o, int ev)
{
	struct row {
		const char *id, *cgroup, *pod;
		uint64_t samples;
		uint32_t procs;
	} *rows = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	const struct vp_proc_container *v;
	size_t nv = vp_profile__containers(p, &v);
	bool any = false;

	for (size_t i = 0; i < nv; i++)
		any |= v[i].c.id[0] != '\0';
	if (!any || ev < 0 || ev >= p->nevents)
		return;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		const struct vp_proc_container *c = vp_profile__container(p, s->pid);
		const char *id = c && c->c.id[0] ? c->c.id : "host";
		size_t k = 0;

		total += s->samples[ev];
		while (k < n && strcmp(rows[k].id, id))
			k++;
		if (k == n) {
			if (vp_grow((void **)&rows, &cap, n + 1, sizeof(*rows)))
				goto cleanup;
			rows[n++] = (struct row){ .id = id, .cgroup = c && c->c.id[0] ? c->cgroup : "",
						  .pod = c ? c->c.pod : "" };
		}
		rows[k].samples += s->samples[ev];
	}
	for (size_t i = 0; i < nv; i++)
		for (size_t k = 0; k < n; k++)
			if (!strcmp(rows[k].id, v[i].c.id[0] ? v[i].c.id : "host"))
				rows[k].procs++;
	for (size_t a = 1; a < n; a++)   /* few rows: insertion sort, largest first */
		for (size_t b = a; b > 0 && rows[b].samples > rows[b - 1].samples; b--) {
			struct row t = rows[b];
			rows[b] = rows[b - 1];
			rows[b - 1] = t;
		}
	vp_out__printf(o, "# by container (%s; report --container ID|/CGROUP|host keeps one):\n", p->events[ev].name);
	for (size_t k = 0; k < n; k++) {
		/* A runtime's 64-hex id by its first 12, as `docker ps` shows it. */
		vp_out__printf(o, "#   %-20.*s %6.1f%% %10llu samples %4u process%s", strlen(rows[k].id) == 64 ? 12 : 20,
			       rows[k].id,
			       total ? 100.0 * (double)rows[k].samples / (double)total : 0.0,
			       (unsigned long long)rows[k].samples, rows[k].procs, rows[k].procs == 1 ? "  " : "es");
		if (rows[k].pod[0])
			vp_out__printf(o, "  pod %s", rows[k].pod);
		if (rows[k].cgroup[0])
			vp_out__printf(o, "  %s", rows[k].cgroup);
		vp_out__puts(o, "\n");
	}
cleanup:
	free(rows);
}

/* The host's share estimated from late sampler timers (common/steal_est.h), on a line
 * of its own under measured steal's: never added to it, never called steal. */
static void est_summary(const struct vp_profile *p, struct vp_out *o, int ev)
{
	int es = -1, te = -1;
	for (int e = 0; e < p->nevents; e++) {
		if (vp_event_estimated(p, e))
			es = e;
		else if (te < 0 && strcmp(p->events[e].name, "steal") && !vp_event_measured(p, e) &&
			 !strcmp(p->events[e].unit, "nanoseconds"))
			te = e;
	}
	if (es < 0 || es == ev)
		return;
	uint64_t ns = vp_event_weight(p, es);
	vp_out__printf(o, "#   %-18s %.1f ms", "hypervisor (estimated)", (double)ns / 1e6);
	if (te >= 0)
		vp_out__printf(o, "  = %.1f%% of sampled time (%s %.1f ms)", vp_pct(ns, vp_event_weight(p, te)),
			       p->events[te].name, (double)vp_event_weight(p, te) / 1e6);
	vp_out__puts(o, "  from sampler timers that fired late; an estimate, apart from measured steal\n");
}

static void layer_summary(const struct vp_profile *p, struct vp_out *o, int ev, const struct vp_frame_count *fc)
{
	uint64_t per[VP_LAYER__COUNT] = { 0 };
	uint64_t total = 0;
	for (size_t f = 0; f < p->nframes; f++) {
		int l = p->frames[f].layer < VP_LAYER__COUNT ? p->frames[f].layer : VP_LAYER_UNKNOWN;
		per[l] += fc[f].self;
		total += fc[f].self;
	}
	int64_t t[VP_LAYER__COUNT];
	round_tenths(per, VP_LAYER__COUNT, total, t);
	vp_out__printf(o, "#\n# self by layer (%s):\n", p->nevents ? p->events[ev].name : "-");
	for (int l = 0; l < VP_LAYER__COUNT; l++) {
		if (!per[l])
			continue;
		vp_out__printf(o, "#   %-12s", vp_layer_name(l));
		print_tenths(o, t[l], 6);
		vp_out__printf(o, "%% %10llu\n", (unsigned long long)per[l]);
	}
	/* Stacks the walk cut short: every ending but the root (unknown ones are not counted). */
	uint64_t walked = 0, whole = 0;
	for (int k = VP_WALK_ROOT; k < VP_WALK__COUNT; k++) {
		char key[48];
		const char *v;

		snprintf(key, sizeof(key), "stack_end.%s", vp_walk_end_name(k));
		if ((v = vp_profile__meta(p, key))) {
			walked += strtoull(v, NULL, 10);
			if (k == VP_WALK_ROOT)
				whole += strtoull(v, NULL, 10);
		}
	}
	if (walked)
		vp_out__printf(o, "#   truncated user stacks %.1f%% (%llu of %llu)\n",
			       100.0 * (double)(walked - whole) / (double)walked,
			       (unsigned long long)(walked - whole), (unsigned long long)walked);
	int st = find_event(p, "steal");
	if (vp_profile__steal_unmeasured(p))
		vp_out__printf(o, "#   %-18s %s\n", "hypervisor (steal)", "not measured (no steal clock)");
	else if (st >= 0 && st != ev) {
		int te = -1;
		for (int e = 0; e < p->nevents && te < 0; e++)
			if (e != st && !strcmp(p->events[e].unit, "nanoseconds"))
				te = e;
		uint64_t sns = vp_event_weight(p, st);
		vp_out__printf(o, "#   %-18s %.1f ms", "hypervisor (steal)", (double)sns / 1e6);
		if (te >= 0)
			vp_out__printf(o, "  = %.1f%% of sampled time (%s %.1f ms)", vp_pct(sns, vp_event_weight(p, te)),
				       p->events[te].name, (double)vp_event_weight(p, te) / 1e6);
		vp_out__puts(o, "\n");
	}
	est_summary(p, o, ev);
	vp_out__puts(o, "#\n");
}

struct row {
	uint32_t frame;     /* UINT32_MAX = the (other) row */
	uint64_t key;       /* sort key */
	double dkey;        /* diff sort key */
};

static const struct vp_profile *sort_p;
static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return strcmp(sort_p->frames[x->frame].name, sort_p->frames[y->frame].name);
}

static int cmp_drow(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	/* Deltas equal up to float noise (7/12 - 1/2 vs 1/12) tie, and sort by name. */
	if (x->dkey - y->dkey > 1e-9 || y->dkey - x->dkey > 1e-9)
		return x->dkey > y->dkey ? -1 : 1;
	return strcmp(sort_p->frames[x->frame].name, sort_p->frames[y->frame].name);
}

/* Symbol and image column widths for what is left of the line. */
static void name_widths(struct vp_out *o, int fixed, int *symw, int *imgw)
{
	int width = o->width > 0 ? o->width : 80;
	int rem = width - fixed - 2;
	*imgw = rem * 2 / 5 > 28 ? 28 : rem * 2 / 5 < 10 ? 10 : rem * 2 / 5;
	*symw = rem - *imgw;
	if (*symw < 10)  /* narrower than this is unreadable: let the line wrap instead */
		*symw = 10;
}

static void name_cols(struct vp_out *o, const struct vp_frame *f, int symw, int imgw, bool color)
{
	char a[1024], b[1024], img[1100];
	const char *c = color ? layer_color(f->layer) : "";
	/* A compiled method's tier goes with its image: "[jit C1]", "[jit C2 OSR]". */
	const char *tn = vp_tier_name(f->tier);
	if (*tn && f->image[0] == '[') {
		snprintf(img, sizeof(img), "%.*s %s]", (int)strcspn(f->image, "]"), f->image, tn);
	} else
		snprintf(img, sizeof(img), "%s", base_name(f->image));
	vp_out__printf(o, "  %s%-11s%s %-*s  %s\n", c, vp_layer_name(f->layer), *c ? "\033[0m" : "", symw,
		       fit(f->name, symw, false, a, sizeof(a)), fit(img, imgw, true, b, sizeof(b)));
}

/* --reverse: the inverted call tree of each of the hottest frames (callee first), its
 * callers as far as CALLERS_DEPTH levels, each caller at least CALLERS_MIN_PERMILLE of
 * the event's samples; shares are of the whole event, as in the table above. */
#define CALLERS_FRAMES 10
#define CALLERS_DEPTH 8
#define CALLERS_MIN_PERMILLE 5

struct callers {
	struct vp_calltree ct;
	uint64_t *n;
	size_t cap;
};

static void callers_print(const struct vp_profile *p, struct vp_out *o, const struct callers *c, uint32_t node,
			  int depth, uint64_t evtotal, uint64_t min, int symw)
{
	/* The children, the heaviest first (a handful: a selection each time is enough). */
	uint32_t kids[64];
	int nk = 0;
	for (uint32_t k = c->ct.n[node].first_child; k != VP_CALLTREE_NONE && nk < 64; k = c->ct.n[k].next_sibling)
		if (c->n[k] >= min)
			kids[nk++] = k;
	for (int i = 0; i < nk; i++) {
		int best = i;
		for (int j = i + 1; j < nk; j++)
			if (c->n[kids[j]] > c->n[kids[best]] ||
			    (c->n[kids[j]] == c->n[kids[best]] && kids[j] < kids[best]))
				best = j;
		uint32_t k = kids[best];
		kids[best] = kids[i];
		kids[i] = k;
		char buf[1024];
		vp_out__printf(o, "%7.1f%%  %*s<- %s\n", vp_pct(c->n[k], evtotal), 2 * depth, "",
			       fit(p->frames[c->ct.n[k].frame].name, symw - 2 * depth, false, buf, sizeof(buf)));
		if (depth < CALLERS_DEPTH)
			callers_print(p, o, c, k, depth + 1, evtotal, min, symw);
	}
}

static int callers(const struct vp_profile *p, struct vp_out *o, int ev, const struct row *rows, size_t nrows,
		   uint64_t evtotal, int symw)
{
	size_t nf = nrows < CALLERS_FRAMES ? nrows : CALLERS_FRAMES;
	uint64_t min = (evtotal * CALLERS_MIN_PERMILLE + 999) / 1000;
	int ret = 0;
	if (!nf || !evtotal)
		return 0;
	vp_out__printf(o, "#\n# callers of the %zu hottest frames (--reverse: callee first, each caller's share of all %s "
		       "samples; callers under %.1f%% left out):\n", nf, p->events[ev].name, CALLERS_MIN_PERMILLE / 10.0);
	for (size_t r = 0; r < nf && !ret; r++) {
		uint32_t f = rows[r].frame;
		struct callers c = { 0 };
		uint32_t root = vp_calltree__add(&c.ct, VP_CALLTREE_NONE, f);
		if (root == VP_CALLTREE_NONE || vp_grow((void **)&c.n, &c.cap, c.ct.len, sizeof(*c.n))) {
			ret = -ENOMEM;
			goto next;
		}
		c.n[root] = 0;
		for (size_t i = 0; i < p->nstacks; i++) {
			const struct vp_stack *s = &p->stacks[i];
			if (!s->nframes || !s->samples[ev] || s->frames[s->nframes - 1] != f)
				continue;
			c.n[root] += s->samples[ev];
			uint32_t node = root;
			for (uint32_t d = 0; d < CALLERS_DEPTH + 1 && d + 1 < s->nframes; d++) {
				size_t len = c.ct.len;
				node = vp_calltree__child(&c.ct, node, s->frames[s->nframes - 2 - d]);
				if (node == VP_CALLTREE_NONE ||
				    (c.ct.len > len && vp_grow((void **)&c.n, &c.cap, c.ct.len, sizeof(*c.n)))) {
					ret = -ENOMEM;
					goto next;
				}
				if (c.ct.len > len)
					c.n[node] = 0;
				c.n[node] += s->samples[ev];
			}
		}
		char buf[1024];
		vp_out__printf(o, "%7.1f%%  %s\n", vp_pct(c.n[root], evtotal), fit(p->frames[f].name, symw, false, buf, sizeof(buf)));
		callers_print(p, o, &c, root, 1, evtotal, min, symw);
next:
		vp_calltree__free(&c.ct);
		free(c.n);
	}
	return ret;
}

static int hotspots(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts->sort_event, ncols = 0, cols[MAX_COLS];
	/* One column per event; steal only when it is the ranked one, since its leaves are
	 * never a frame of the other events (its summary line is in the layer summary). */
	for (int e = 0; e < p->nevents && ncols < MAX_COLS; e++)
		if (e == ev || (strcmp(p->events[e].name, "steal") && !vp_event_estimated(p, e)))
			cols[ncols++] = e;
	struct vp_frame_count *fev = NULL;
	int top = opts->top > 0 ? opts->top : DEFAULT_TOP, ret = 0;
	struct vp_frame_count *fc[MAX_COLS] = { 0 };
	struct row *rows = calloc(p->nframes + 1, sizeof(*rows));
	uint64_t *cnt = calloc((size_t)top + 1, sizeof(*cnt));
	int64_t *tenths = calloc((size_t)top + 1, sizeof(*tenths));
	int64_t *col_t[MAX_COLS] = { 0 };
	if (!rows || !cnt || !tenths) {
		ret = -ENOMEM;
		goto cleanup;
	}
	for (int e = 0; e < ncols; e++) {
		fc[e] = vp_frame_counts(p, cols[e]);
		col_t[e] = calloc((size_t)top + 1, sizeof(int64_t));
		if (!fc[e] || !col_t[e]) {
			ret = -ENOMEM;
			goto cleanup;
		}
	}
	fev = vp_frame_counts(p, ev);
	if (!fev) {
		ret = -ENOMEM;
		goto cleanup;
	}
	layer_summary(p, o, ev, fev);
	size_t nrows = 0;
	for (size_t f = 0; f < p->nframes; f++) {
		/* Sorted by self, frames that are never a leaf only add empty rows. */
		if (opts->sort == VP_SORT_TOTAL ? !fev[f].total : !fev[f].self)
			continue;
		rows[nrows].frame = (uint32_t)f;
		rows[nrows].key = opts->sort == VP_SORT_TOTAL ? fev[f].total : fev[f].self;
		nrows++;
	}
	sort_p = p;
	vp_sort(rows, nrows, sizeof(*rows), cmp_row);
	size_t shown = nrows < (size_t)top ? nrows : (size_t)top;
	for (int e = 0; e < ncols; e++) {
		uint64_t total = vp_event_samples(p, cols[e]), sum = 0;
		for (size_t i = 0; i < shown; i++) {
			cnt[i] = fc[e][rows[i].frame].self;
			sum += cnt[i];
		}
		cnt[shown] = total - sum;
		round_column(cnt, shown, total, col_t[e]);
	}
	uint64_t evtotal = vp_event_samples(p, ev);
	/* Each event's column as wide as its name (cpu-clock, context-switches), at least
	 * as wide as a percentage. */
	int cw[MAX_COLS], fixed = 8 + 10 + 2 + 12, wide = fixed, width = o->width > 0 ? o->width : 80;
	for (int e = 0; e < ncols; e++) {
		int n = ncols > 1 ? (int)strnlen(p->events[cols[e]].name, 40) : 5;
		cw[e] = n > 7 ? n : 7;
		wide += cw[e] + 1;
	}
	/* A narrow terminal keeps its room for the names: names cut to 7 there. */
	for (int e = 0; e < ncols && wide + 2 + 10 + 10 > width; e++)
		cw[e] = 7;
	for (int e = 0; e < ncols; e++)
		fixed += cw[e] + 1;
	int symw, imgw;
	name_widths(o, fixed, &symw, &imgw);
	for (int e = 0; e < ncols; e++)
		vp_out__printf(o, " %*.*s", cw[e], cw[e], ncols > 1 ? p->events[cols[e]].name : "self%");
	/* A measured time event shows its time, in ms, where others show samples. */
	double ms_per = (vp_event_measured(p, ev) || vp_event_estimated(p, ev)) && evtotal ? (double)vp_event_weight(p, ev) / 1e6 / (double)evtotal : 0;
	vp_out__printf(o, "%8s%10s  %-11s %-*s  %s\n", "total%", ms_per ? "self ms" : "samples", "layer", symw, "symbol",
		       "image");
	for (size_t i = 0; i < shown; i++) {
		uint32_t f = rows[i].frame;
		for (int e = 0; e < ncols; e++) {
			print_tenths(o, col_t[e][i], cw[e]);
			vp_out__puts(o, " ");
		}
		/* The self column is rounded so that it adds up to 100.0, which can lift a
		 * small frame a tenth above its plain rounding; total is never below self. */
		int64_t tt = evtotal ? (int64_t)((fev[f].total * 1000 + evtotal / 2) / evtotal) : 0;
		for (int e = 0; e < ncols; e++)
			if (cols[e] == ev && col_t[e][i] > tt)
				tt = col_t[e][i];
		print_tenths(o, tt, 7);
		if (ms_per)
			vp_out__printf(o, " %10.1f", (double)fev[f].self * ms_per);
		else
			vp_out__printf(o, " %10llu", (unsigned long long)fev[f].self);
		name_cols(o, &p->frames[f], symw, imgw, opts->color);
	}
	bool other = nrows > shown;
	for (int e = 0; e < ncols; e++)
		other = other || col_t[e][shown] != 0;
	if (other) {  /* what the table leaves out, so that the self% column adds up to 100.0 */
		for (int e = 0; e < ncols; e++) {
			print_tenths(o, col_t[e][shown], cw[e]);
			vp_out__puts(o, " ");
		}
		uint64_t rest = 0;
		for (size_t i = shown; i < nrows; i++)
			rest += fev[rows[i].frame].self;
		if (ms_per)
			vp_out__printf(o, "%7s %10.1f  %-11s (other", "-", (double)rest * ms_per, "");
		else
			vp_out__printf(o, "%7s %10llu  %-11s (other", "-", (unsigned long long)rest, "");
		if (nrows > shown)
			vp_out__printf(o, ": %zu more frames", nrows - shown);
		vp_out__puts(o, ")\n");
	}
	/* The callers of the frames ranked by self; ranked by total, a frame's callers are
	 * not the whole of its time, so the section says what it shows. */
	if (opts->reverse && opts->sort == VP_SORT_SELF)
		ret = callers(p, o, ev, rows, shown, evtotal, symw + imgw);
cleanup:
	free(fev);
	for (int e = 0; e < ncols; e++) {
		free(fc[e]);
		free(col_t[e]);
	}
	free(rows);
	free(cnt);
	free(tenths);
	return ret;
}

static int diff(const struct vp_profile *p, const struct vp_profile *base, struct vp_out *o,
		const struct vp_report_opts *opts)
{
	int ev = opts->sort_event, bev = vp_event_match(p, ev, base), ret = 0;
	int top = opts->top > 0 ? opts->top : DEFAULT_TOP;
	struct vp_keyspace ks = { 0 };
	struct vp_frame_count *pc = NULL, *bc = NULL;
	double *pp = NULL, *bp = NULL;
	struct row *rows = NULL;
	if ((ret = vp_keyspace__init(&ks, p, base)) < 0)
		return ret;
	size_t n = ks.u->nframes;
	pc = vp_frame_counts(p, ev);
	bc = bev >= 0 ? vp_frame_counts(base, bev) : NULL;
	pp = calloc(n + 1, sizeof(*pp));
	bp = calloc(n + 1, sizeof(*bp));
	rows = calloc(n + 1, sizeof(*rows));
	if (!pc || (bev >= 0 && !bc) || !pp || !bp || !rows) {
		ret = -ENOMEM;
		goto cleanup;
	}
	uint64_t pt = vp_event_samples(p, ev), bt = bev >= 0 ? vp_event_samples(base, bev) : 0;
	/* --sort total compares inclusive shares: a frame with little self time (a lambda's
	 * proxy, a caller) changes there when a run names it differently. */
	bool total = opts->sort == VP_SORT_TOTAL;
	for (size_t f = 0; f < p->nframes; f++)
		pp[f] = vp_pct(total ? pc[f].total : pc[f].self, pt);
	for (size_t f = 0; bc && f < base->nframes; f++)
		bp[ks.base_map[f]] += vp_pct(total ? bc[f].total : bc[f].self, bt);
	size_t nrows = 0;
	for (size_t f = 0; f < n; f++) {
		if (pp[f] == 0 && bp[f] == 0)
			continue;
		double d = pp[f] - bp[f];
		rows[nrows].frame = (uint32_t)f;
		rows[nrows].dkey = d < 0 ? -d : d;
		nrows++;
	}
	sort_p = ks.u;
	vp_sort(rows, nrows, sizeof(*rows), cmp_drow);
	vp_out__printf(o, "# diff on %s: base %llu samples, new %llu samples; %s%% normalized per profile\n",
		       p->nevents ? p->events[ev].name : "-", (unsigned long long)bt, (unsigned long long)pt,
		       total ? "total" : "self");
	if (bev < 0)
		vp_out__printf(o, "# warning: the base profile has no event %s\n", p->nevents ? p->events[ev].name : "-");
	int symw, imgw;
	name_widths(o, 8 + 8 + 8 + 2 + 12, &symw, &imgw);
	vp_out__printf(o, "%8s%8s%8s  %-11s %-*s  %s\n", "base%", "new%", "delta", "layer", symw, "symbol", "image");
	for (size_t i = 0; i < nrows && i < (size_t)top; i++) {
		uint32_t f = rows[i].frame;
		vp_out__printf(o, "%7.1f %7.1f %+7.1f", bp[f], pp[f], pp[f] - bp[f]);
		name_cols(o, &ks.u->frames[f], symw, imgw, opts->color);
	}
cleanup:
	free(pc);
	free(bc);
	free(pp);
	free(bp);
	free(rows);
	vp_keyspace__fini(&ks);
	return ret;
}

int report_text(const struct vp_profile *p, const struct vp_profile *base, struct vp_out *o,
		const struct vp_report_opts *opts)
{
	static const struct vp_report_opts defaults;
	struct vp_report_opts op = opts ? *opts : defaults;
	if (op.sort_event < 0 || op.sort_event >= p->nevents)
		op.sort_event = 0;
	header(p, o, &op);
	if (!p->nevents) {
		vp_out__puts(o, "# no samples\n");
		return o->err;
	}
	if (!base)
		container_summary(p, o, op.sort_event);
	int ret = base ? diff(p, base, o, &op) : hotspots(p, o, &op);
	return ret ? ret : o->err;
}
