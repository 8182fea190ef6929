/* The wall-time view: see wall.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/session_format.h"
#include "common/util.h"
#include "common/steal_clock.h"
#include "postproc/wall.h"

#define STACKS_PER_THREAD 8
#define LABEL_FRAMES 3

const char *vp_sched_state_frame(int state)
{
	switch (state) {
	case VP_SCHED_STEAL:            return "[hypervisor: steal]";
	case VP_SCHED_BLOCKED_SLEEP:    return "[blocked: sleep]";
	case VP_SCHED_BLOCKED_IO:       return "[blocked: io]";
	case VP_SCHED_BLOCKED_LOCK:     return "[blocked: lock]";
	case VP_SCHED_BLOCKED_OTHER:    return "[blocked: uninterruptible]";
	case VP_SCHED_RUNNABLE_PREEMPT: return "[runnable: preempted]";
	case VP_SCHED_RUNNABLE_WOKEN:   return "[runnable: woken]";
	case VP_SCHED_BLOCKED_FD:       return "[blocked: io wait]";
	case VP_SCHED_BLOCKED_WAIT:     return "[blocked: other wait]";
	case VP_SCHED_BLOCKED_PARK:     return "[blocked: park]";
	case VP_SCHED_BLOCKED_OBJWAIT:  return "[blocked: wait]";
	default:                        return "[off-cpu: unknown state]";
	}
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The class of a method frame "pkg.Outer$Inner.method(args)": "Outer". */
static void simple_class(const char *name, char *out, size_t len)
{
	const char *paren = strchr(name, '('), *end = paren ? paren : name + strlen(name), *dot = NULL, *start = name;
	for (const char *c = name; c < end; c++)
		if (*c == '.')
			dot = c;
	if (!dot || !len)
		return;
	for (const char *c = name; c < dot; c++)
		if (*c == '.')
			start = c + 1;
	size_t n = 0;
	while (start + n < dot && start[n] != '$' && n + 1 < len)
		n++;
	memcpy(out, start, n);
	out[n] = '\0';
}

/* Frames of java.util.concurrent's parking machinery: the class a thread parks for is
 * the first caller above them. */
static bool park_machinery(const char *f)
{
	return starts(f, "java.util.concurrent.locks.LockSupport.") || starts(f, "jdk.internal.misc.Unsafe.") ||
	       starts(f, "sun.misc.Unsafe.") || starts(f, "java.util.concurrent.locks.AbstractQueuedSynchronizer") ||
	       starts(f, "java.util.concurrent.locks.AbstractQueuedLongSynchronizer") || f[0] == '[' ||
	       strchr(f, '(') == NULL;   /* native frames between the Java ones */
}

int vp_sched_java_state(int state, const char *const *frames, int n, char *detail, size_t len)
{
	if (len)
		detail[0] = '\0';
	/* I/O wait (in_iowait), uninterruptible sleeps and run-queue waits say what they
	 * are already; a futex, a timed sleep, a poll or another wait may be Java's. */
	if (state != VP_SCHED_BLOCKED_LOCK && state != VP_SCHED_BLOCKED_SLEEP && state != VP_SCHED_BLOCKED_FD &&
	    state != VP_SCHED_BLOCKED_WAIT)
		return state;
	for (int i = 0; i < n; i++) {
		const char *f = frames[i] ? frames[i] : "";
		if (starts(f, "java.lang.Thread.sleep") || starts(f, "JVM_Sleep"))
			return VP_SCHED_BLOCKED_SLEEP;
		if (starts(f, "java.lang.Object.wait") || starts(f, "JVM_MonitorWait") || strstr(f, "ObjectMonitor::wait"))
			return VP_SCHED_BLOCKED_OBJWAIT;
		if (strstr(f, "ObjectMonitor::enter") || strstr(f, "ObjectMonitor::EnterI") ||
		    strstr(f, "ObjectSynchronizer::enter")) {
			snprintf(detail, len, "monitor");
			return VP_SCHED_BLOCKED_LOCK;
		}
		if (starts(f, "jdk.internal.misc.Unsafe.park") || starts(f, "sun.misc.Unsafe.park") ||
		    starts(f, "java.util.concurrent.locks.LockSupport.park") || starts(f, "Unsafe_Park")) {
			for (int k = i + 1; k < n; k++)
				if (frames[k] && !park_machinery(frames[k])) {
					simple_class(frames[k], detail, len);
					break;
				}
			return VP_SCHED_BLOCKED_PARK;
		}
		/* Sockets, pipes and files read through NIO or the classic streams. */
		if (starts(f, "sun.nio.ch.") || starts(f, "java.net.") || starts(f, "java.io.FileInputStream.read") ||
		    starts(f, "java.io.RandomAccessFile.read") || starts(f, "sun.nio.fs."))
			return VP_SCHED_BLOCKED_FD;
		/* The first Java frame that is none of these: the wait is the native code's. */
		if (strchr(f, '(') && strchr(f, '.') && f[0] != '[' && !strstr(f, "::"))
			break;
	}
	return state;
}

const char *vp_wall_part_name(int part)
{
	static const char *const names[VP_WALL__COUNT] = { "running", "runnable", "blocked", "steal" };
	return part >= 0 && part < VP_WALL__COUNT ? names[part] : "?";
}

static int find_event(const struct vp_profile *p, const char *name)
{
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, name))
			return e;
	return -1;
}

/* The on-CPU time event: the first nanosecond event that is not one of the switch
 * tracer's or of this view's. */
static int oncpu_event(const struct vp_profile *p)
{
	static const char *const not[] = { "off-cpu", "steal", "running", "runnable", "blocked", "wall", NULL };
	for (int e = 0; e < p->nevents; e++) {
		bool skip = strcmp(p->events[e].unit, "nanoseconds") != 0;
		for (int k = 0; !skip && not[k]; k++)
			skip = !strcmp(p->events[e].name, not[k]);
		if (!skip)
			return e;
	}
	return -1;
}

static bool is_runnable(const struct vp_profile *p, const struct vp_stack *s)
{
	return s->nframes && !strncmp(p->frames[s->frames[s->nframes - 1]].name, "[runnable:", 10);
}

/* Per-thread sums, in a small open-addressing table keyed by (pid, tid). */
struct tsum {
	uint32_t pid, tid;
	bool used;
	const char *comm;
	uint64_t sampled;              /* on-CPU event weight */
	uint64_t part[VP_WALL__COUNT];
	uint64_t wall;
	double scale;
};
struct ttab {
	struct tsum *t;
	size_t cap, n;
};

static struct tsum *ttab_get(struct ttab *tt, uint32_t pid, uint32_t tid)
{
	if (tt->n * 2 >= tt->cap) {
		size_t cap = tt->cap ? tt->cap * 2 : 256;
		struct tsum *n = calloc(cap, sizeof(*n));
		if (!n)
			return NULL;
		for (size_t i = 0; i < tt->cap; i++) {
			if (!tt->t[i].used)
				continue;
			size_t h = ((size_t)tt->t[i].pid * 2654435761u ^ tt->t[i].tid) & (cap - 1);
			while (n[h].used)
				h = (h + 1) & (cap - 1);
			n[h] = tt->t[i];
		}
		free(tt->t);
		tt->t = n;
		tt->cap = cap;
	}
	size_t h = ((size_t)pid * 2654435761u ^ tid) & (tt->cap - 1);
	while (tt->t[h].used && (tt->t[h].pid != pid || tt->t[h].tid != tid))
		h = (h + 1) & (tt->cap - 1);
	if (!tt->t[h].used) {
		tt->t[h] = (struct tsum){ .pid = pid, .tid = tid, .used = true, .scale = 1.0 };
		tt->n++;
	}
	return &tt->t[h];
}

int vp_wall__add_events(struct vp_profile *p, char *err, size_t errlen)
{
	int wall = find_event(p, "wall");
	if (wall >= 0)
		return wall;
	int off = find_event(p, "off-cpu"), st = find_event(p, "steal"), on = oncpu_event(p);
	if (off < 0) {
		vp_set_err(err, errlen, "the session has no off-CPU time; record it with 'viprof record --off-cpu'");
		return -ENOENT;
	}
	if (on < 0 && !p->nthreads) {
		vp_set_err(err, errlen, "the session has no on-CPU time event (cpu-clock or task-clock); record with -e cpu-clock");
		return -ENOENT;
	}
	if (p->nevents + 4 > (int)(sizeof(p->events) / sizeof(p->events[0]))) {
		vp_set_err(err, errlen, "too many events for the wall view (%d recorded); record fewer with -e", p->nevents);
		return -ENOSPC;
	}
	int ev[VP_WALL__COUNT];
	ev[VP_WALL_RUNNING] = vp_profile__add_event(p, "running", "nanoseconds");
	ev[VP_WALL_RUNNABLE] = vp_profile__add_event(p, "runnable", "nanoseconds");
	ev[VP_WALL_BLOCKED] = vp_profile__add_event(p, "blocked", "nanoseconds");
	ev[VP_WALL_STEAL] = st;
	wall = vp_profile__add_event(p, "wall", "nanoseconds");
	if (ev[VP_WALL_RUNNING] < 0 || ev[VP_WALL_RUNNABLE] < 0 || ev[VP_WALL_BLOCKED] < 0 || wall < 0) {
		vp_set_err(err, errlen, "cannot add the wall view's events");
		return -ENOSPC;
	}

	/* Scale each thread's sampled on-CPU time to its exact running time (on-CPU less
	 * steal) where the switch tracer measured it. */
	struct ttab tt = { 0 };
	int ret = 0;
	for (size_t i = 0; on >= 0 && i < p->nstacks; i++) {
		struct tsum *t = ttab_get(&tt, p->stacks[i].pid, p->stacks[i].tid);
		if (!t) {
			ret = -ENOMEM;
			goto cleanup;
		}
		t->sampled += p->stacks[i].weight[on];
		t->comm = p->stacks[i].comm;
	}
	for (size_t i = 0; i < tt.cap; i++) {
		struct tsum *t = &tt.t[i];
		const struct vp_thread_times *x = t->used ? vp_profile__find_thread(p, t->pid, t->tid) : NULL;
		/* A carrier's exact time also covers the samples report --vthreads moved to the
		 * virtual threads it ran (which keep their sampled time). */
		if (x && t->sampled && (x->oncpu_ns || x->switches))
			t->scale = (double)(x->oncpu_ns > x->steal_ns ? x->oncpu_ns - x->steal_ns : 0) /
				   (double)(t->sampled + x->vthread_ns);
	}
	size_t nstacks = p->nstacks;
	for (size_t i = 0; i < nstacks; i++) {
		struct vp_stack *s = &p->stacks[i];
		struct tsum *t = on >= 0 ? ttab_get(&tt, s->pid, s->tid) : NULL;
		uint64_t w[VP_WALL__COUNT] = { 0 }, n[VP_WALL__COUNT] = { 0 };
		if (on >= 0) {
			w[VP_WALL_RUNNING] = (uint64_t)((double)s->weight[on] * (t ? t->scale : 1.0) + 0.5);
			n[VP_WALL_RUNNING] = s->samples[on];
		}
		int part = is_runnable(p, s) ? VP_WALL_RUNNABLE : VP_WALL_BLOCKED;
		w[part] = s->weight[off];
		n[part] = s->samples[off];
		if (st >= 0) {
			w[VP_WALL_STEAL] = s->weight[st];
			n[VP_WALL_STEAL] = s->samples[st];
		}
		for (int k = 0; k < VP_WALL__COUNT; k++) {
			if (k != VP_WALL_STEAL) {
				s->weight[ev[k]] = w[k];
				s->samples[ev[k]] = n[k];
			}
			s->weight[wall] += w[k];
			s->samples[wall] += n[k];
		}
	}
	/* A thread that ran but was never sampled: its running time under one frame. */
	for (size_t i = 0; i < p->nthreads; i++) {
		const struct vp_thread_times *x = &p->threads[i];
		struct tsum *t = on >= 0 ? ttab_get(&tt, x->pid, x->tid) : NULL;
		uint64_t run = x->oncpu_ns > x->steal_ns ? x->oncpu_ns - x->steal_ns : 0;
		if (!run || (t && t->sampled))
			continue;
		struct vp_frame f = { .name = "[running: not sampled]", .image = "", .build_id = "", .file = "",
				      .layer = VP_LAYER_UNKNOWN };
		uint32_t fid = vp_profile__frame(p, &f);
		if (fid == UINT32_MAX ||
		    (ret = vp_profile__add(p, &fid, 1, x->pid, x->tid, t && t->comm ? t->comm : "", ev[VP_WALL_RUNNING], 1, run)) ||
		    (ret = vp_profile__add(p, &fid, 1, x->pid, x->tid, t && t->comm ? t->comm : "", wall, 1, run))) {
			ret = ret ? ret : -ENOMEM;
			goto cleanup;
		}
	}
	ret = wall;
cleanup:
	free(tt.t);
	return ret;
}

/* Stacks grouped by (thread, user frames): the user frames are the root-side run of
 * frames that are neither kernel nor hypervisor. */
static uint32_t user_len(const struct vp_profile *p, const struct vp_stack *s)
{
	uint32_t n = 0;
	while (n < s->nframes) {
		uint8_t l = p->frames[s->frames[n]].layer;
		if (l == VP_LAYER_KERNEL || l == VP_LAYER_HYPERVISOR)
			break;
		n++;
	}
	return n;
}

static const struct vp_profile *sort_prof;
static int cmp_group(const void *a, const void *b)
{
	const struct vp_stack *x = &sort_prof->stacks[*(const uint32_t *)a], *y = &sort_prof->stacks[*(const uint32_t *)b];
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	uint32_t lx = user_len(sort_prof, x), ly = user_len(sort_prof, y);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return memcmp(x->frames, y->frames, lx * sizeof(uint32_t));
}

struct row {
	uint32_t first;                /* a stack of the group (for the label) */
	uint64_t part[VP_WALL__COUNT], wall;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	return x->wall < y->wall ? 1 : x->wall > y->wall ? -1 : 0;
}

static int cmp_tsum(const void *a, const void *b)
{
	const struct tsum *x = a, *y = b;
	if (x->wall != y->wall)
		return x->wall < y->wall ? 1 : -1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Set per report: no steal clock ran, so the steal column is unknown ("-"), not 0. */
static bool steal_unmeasured;

static void ms_cols(struct vp_out *o, const uint64_t *part, uint64_t wall)
{
	for (int k = 0; k < VP_WALL__COUNT; k++)
		if (k == VP_WALL_STEAL && steal_unmeasured)
			vp_out__printf(o, " %10s", "-");
		else
			vp_out__printf(o, " %10.1f", (double)part[k] / 1e6);
	vp_out__printf(o, " %10.1f", (double)wall / 1e6);
}

static void label(struct vp_out *o, const struct vp_profile *p, const struct vp_stack *s)
{
	uint32_t n = user_len(p, s), from = n > LABEL_FRAMES ? n - LABEL_FRAMES : 0;
	if (!n) {
		/* A kernel thread, or a stack without user frames: its innermost kernel
		 * function below the scheduler says what it was. */
		vp_out__puts(o, s->nframes ? p->frames[s->frames[0]].name : "[unknown]");
		vp_out__puts(o, " [kernel]");
		return;
	}
	if (from)
		vp_out__puts(o, "..;");
	for (uint32_t i = from; i < n; i++)
		vp_out__printf(o, "%s%s", i > from ? ";" : "", p->frames[s->frames[i]].name);
}

static void steal_header(const struct vp_profile *p, struct vp_out *o, uint64_t threads_steal)
{
	const char *clock = vp_profile__meta(p, "sched_steal.clock_ns"), *charged = vp_profile__meta(p, "sched_steal.charged_ns");
	const char *idle = vp_profile__meta(p, "sched_steal.idle_ns"), *kern = vp_profile__meta(p, "sched_steal.kernel_ns");
	const char *ps = vp_profile__meta(p, "steal.total");
	if ((steal_unmeasured = vp_profile__steal_unmeasured(p))) {
		char why[512];
		vp_steal_clock__why(why, sizeof(why));
		vp_out__printf(o, "# %s; the steal column shows -\n", why);
		return;
	}
	vp_out__printf(o, "# steal: %.3f ms charged to the threads shown", (double)threads_steal / 1e6);
	if (charged && clock)
		vp_out__printf(o, "; at switches on all vCPUs %.3f ms (idle %.3f ms) of %.3f ms the run queues' steal clocks advanced",
			       strtod(charged, NULL) / 1e6, idle ? strtod(idle, NULL) / 1e6 : 0.0, strtod(clock, NULL) / 1e6);
	vp_out__puts(o, "\n");
	if (kern || ps) {
		vp_out__puts(o, "# steal cross-check: the kernel accounted");
		if (kern)
			vp_out__printf(o, " %.3f ms between the same switches (rq->prev_steal_time, at ticks)%s",
				       strtod(kern, NULL) / 1e6, ps ? ";" : "");
		if (ps)
			vp_out__printf(o, " /proc/stat %.1f ms over the recording (10 ms ticks)", strtod(ps, NULL) / 1e6);
		vp_out__puts(o, "\n");
	}
}

int report_wall_text(struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	char err[256] = "";
	int wall = vp_wall__add_events(p, err, sizeof(err));
	if (wall < 0) {
		vp_out__printf(o, "# no wall-time view: %s\n", err);
		return wall;
	}
	int ev[VP_WALL__COUNT] = { find_event(p, "running"), find_event(p, "runnable"), find_event(p, "blocked"),
				   find_event(p, "steal") };
	struct ttab tt = { 0 };
	uint32_t *idx = malloc((p->nstacks ? p->nstacks : 1) * sizeof(*idx));
	struct row *rows = malloc((p->nstacks ? p->nstacks : 1) * sizeof(*rows));
	struct tsum *ts = NULL;
	int ret = -ENOMEM;
	size_t nidx = 0;
	if (!idx || !rows)
		goto cleanup;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->weight[wall])
			continue;
		struct tsum *t = ttab_get(&tt, s->pid, s->tid);
		if (!t)
			goto cleanup;
		/* The thread's name is the one on most of its time: a thread renamed after it
		 * started (every JVM thread: "java" until HotSpot names it) has a few early
		 * stacks under its old name. t->sampled (unused here) holds that stack's wall. */
		if (!t->comm || !*t->comm || s->weight[wall] > t->sampled) {
			t->comm = s->comm;
			t->sampled = s->weight[wall];
		}
		for (int k = 0; k < VP_WALL__COUNT; k++)
			t->part[k] += ev[k] >= 0 ? s->weight[ev[k]] : 0;
		t->wall += s->weight[wall];
		idx[nidx++] = (uint32_t)i;
	}
	ts = malloc((tt.n ? tt.n : 1) * sizeof(*ts));
	if (!ts)
		goto cleanup;
	size_t nt = 0;
	uint64_t all_steal = 0;
	for (size_t i = 0; i < tt.cap; i++)
		if (tt.t[i].used) {
			ts[nt++] = tt.t[i];
			all_steal += tt.t[i].part[VP_WALL_STEAL];
		}
	vp_sort(ts, nt, sizeof(*ts), cmp_tsum);
	sort_prof = p;
	vp_sort(idx, nidx, sizeof(*idx), cmp_group);

	vp_out__puts(o, "# wall time per thread and per stack: running + runnable + blocked + steal = wall\n");
	vp_out__puts(o, "# running: on CPU (sampled per stack; scaled to the switch tracer's exact time less steal per thread)\n");
	vp_out__puts(o, "# runnable: waiting on a run queue (preempted, or woken and not yet running)\n");
	vp_out__puts(o, "# blocked: sleep, park, wait, lock, io, io wait (poll/read), other wait or uninterruptible; steal: the hypervisor had the vCPU\n");
	vp_out__puts(o, "# all figures in milliseconds (ms) of time\n");
	steal_header(p, o, all_steal);
	vp_out__puts(o, "#\n");
	int top = opts && opts->top > 0 ? opts->top : 25;
	/* Full thread names (Java's are longer than the kernel's 15 characters), in a
	 * column as wide as the longest shown, up to 40. */
	int namew = 15;
	for (size_t i = 0; i < nt && (int)i < top; i++) {
		int l = ts[i].comm ? (int)strlen(ts[i].comm) : 0;
		if (l > namew)
			namew = l < 40 ? l : 40;
	}
	vp_out__printf(o, "# %-7s %-7s %-*s %10s %10s %10s %10s %10s  (ms)\n", "pid", "tid", namew, "thread", "running",
		       "runnable", "blocked", "steal", "wall");
	for (size_t i = 0; i < nt && (int)i < top; i++) {
		const struct tsum *t = &ts[i];
		vp_out__printf(o, "  %-7u %-7u %-*s", t->pid, t->tid, namew, t->comm ? t->comm : "");
		ms_cols(o, t->part, t->wall);
		vp_out__puts(o, "\n");
		/* Its groups: stacks of this thread with the same user frames. */
		size_t nr = 0, a = 0;
		while (a < nidx && (p->stacks[idx[a]].pid != t->pid || p->stacks[idx[a]].tid != t->tid))
			a++;
		while (a < nidx && p->stacks[idx[a]].pid == t->pid && p->stacks[idx[a]].tid == t->tid) {
			size_t b = a;
			struct row r = { .first = idx[a] };
			while (b < nidx && cmp_group(&idx[a], &idx[b]) == 0) {
				const struct vp_stack *s = &p->stacks[idx[b]];
				for (int k = 0; k < VP_WALL__COUNT; k++)
					r.part[k] += ev[k] >= 0 ? s->weight[ev[k]] : 0;
				r.wall += s->weight[wall];
				b++;
			}
			rows[nr++] = r;
			a = b;
		}
		vp_sort(rows, nr, sizeof(*rows), cmp_row);
		for (size_t k = 0; k < nr && k < STACKS_PER_THREAD; k++) {
			vp_out__printf(o, "  %-*s", 16 + namew, "");
			ms_cols(o, rows[k].part, rows[k].wall);
			vp_out__puts(o, "  ");
			label(o, p, &p->stacks[rows[k].first]);
			vp_out__puts(o, "\n");
		}
		if (nr > STACKS_PER_THREAD)
			vp_out__printf(o, "  %-*s (%zu more stacks)\n", 16 + namew, "", nr - STACKS_PER_THREAD);
	}
	if (nt > (size_t)top)
		vp_out__printf(o, "# %zu more threads (--top N shows more)\n", nt - (size_t)top);
	ret = o->err;
cleanup:
	free(tt.t);
	free(ts);
	free(idx);
	free(rows);
	return ret;
}
