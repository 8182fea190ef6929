/* The wall-time view and its table: see wall.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/session_format.h"
#include "common/util.h"
#include "common/steal_clock.h"
#include "common/steal_est.h"
#include "postproc/profile_xform.h"
#include "postproc/sched_state.h"
#include "report/wall.h"

#define STACKS_PER_THREAD 8
#define LABEL_FRAMES 3
#define APP_FRAMES 2

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static bool starts_any(const char *s, const char *const *prefixes)
{
	for (int i = 0; prefixes[i]; i++)
		if (starts(s, prefixes[i]))
			return true;
	return false;
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
	bool internal;                 /* a JVM's own thread (GC, compiler, VM, launcher) */
	uint64_t idle;                 /* wall time in "[idle: ...]" */
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

/* When a thread that ran but was never sampled ran is not known, only that it was
 * between the first and the last moment the recording saw it (its off-CPU intervals), or
 * anywhere in the recording when it saw none: its one sample is spread over that span, so
 * that the parts it is in keep a time strip. Only for profiles with times (HTML). */
static int not_sampled_time(struct vp_profile *p, uint32_t sid, int running, int wall)
{
	if (!p->ntimes)
		return 0;
	const struct vp_stack *s = &p->stacks[sid];
	uint64_t lo = UINT64_MAX, hi = 0, all_hi = 0;
	for (size_t i = 0; i < p->ntimes; i++) {
		const struct vp_sample_time *x = &p->times[i];
		uint64_t end = x->t + x->dur;
		all_hi = end > all_hi ? end : all_hi;
		if (x->stack >= p->nstacks || p->stacks[x->stack].pid != s->pid || p->stacks[x->stack].tid != s->tid)
			continue;
		lo = x->t < lo ? x->t : lo;
		hi = end > hi ? end : hi;
	}
	if (lo >= hi) {
		lo = 0;
		hi = all_hi;
	}
	int ret = vp_profile__add_time_span(p, sid, running, lo, hi - lo, 1);
	return ret ? ret : vp_profile__add_time_span(p, sid, wall, lo, hi - lo, 1);
}

/* The parts' sample times, for the HTML strip: each time of the on-CPU, off-CPU and
 * steal events is also one of its part (an off-CPU one by its stack: runnable or
 * blocked) and of wall, interval and all, so that the waits in those views' strips are
 * spread over their intervals as in off-cpu's. 0 or -ENOMEM. */
static int add_part_times(struct vp_profile *p, int on, int off, int st, const int *ev, int wall)
{
	size_t n = p->ntimes;
	for (size_t i = 0; i < n; i++) {
		struct vp_sample_time x = p->times[i];   /* a copy: adding moves the array */
		int part = (int)x.event == on ? VP_WALL_RUNNING : (int)x.event == off ? VP_WALL_BLOCKED
				: st >= 0 && (int)x.event == st ? VP_WALL_STEAL : -1;
		if (part < 0 || x.stack >= p->nstacks)
			continue;
		if (part == VP_WALL_BLOCKED && is_runnable(p, &p->stacks[x.stack]))
			part = VP_WALL_RUNNABLE;
		int ret = part == VP_WALL_STEAL ? 0 : vp_profile__add_time_span(p, x.stack, ev[part], x.t, x.dur, x.samples);
		if (ret || (ret = vp_profile__add_time_span(p, x.stack, wall, x.t, x.dur, x.samples)))
			return ret;
	}
	return 0;
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
		uint32_t fid = vp_profile__frame(p, &f), sid = UINT32_MAX;
		if (fid == UINT32_MAX ||
		    (ret = vp_profile__add_stack(p, &fid, 1, x->pid, x->tid, t && t->comm ? t->comm : "", ev[VP_WALL_RUNNING], 1,
						 run, &sid)) ||
		    (ret = vp_profile__add(p, &fid, 1, x->pid, x->tid, t && t->comm ? t->comm : "", wall, 1, run)) ||
		    (ret = not_sampled_time(p, sid, ev[VP_WALL_RUNNING], wall))) {
			ret = ret ? ret : -ENOMEM;
			goto cleanup;
		}
	}
	if ((ret = add_part_times(p, on, off, st, ev, wall)))
		goto cleanup;
	ret = wall;
cleanup:
	free(tt.t);
	return ret;
}

/* The user frames of a stack: the root-side run of frames that are neither kernel nor
 * hypervisor. */
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

static bool java_layer(uint8_t layer)
{
	return layer == VP_LAYER_JIT || layer == VP_LAYER_INLINED || layer == VP_LAYER_INTERPRETED;
}

/* What a row of a thread stands for: the innermost Java frames of its stacks (or, in
 * a stack without Java frames, its innermost user frames) and the wait they were in.
 * Grouping by the Java frames, not by the whole stack, puts every Thread.sleep of a
 * method in one row whatever libc and HotSpot frames lie below it (issue 33: rows ended
 * in "...;pthread_cond_timedwait;__futex_abstimed_wait_common", so a sleep, an
 * Object.wait and a monitor looked alike). */
struct rowkey {
	char *text;                    /* "..;WaitMix.doSleep;Thread.sleep [sleep]", without the [running] of a row */
	bool java, bracket;            /* named by Java frames; a synthetic "[...]" frame names it */
	const char *tag;               /* "[blocked: sleep]", "[idle: GC worker]", ...; "" on CPU or runnable */
};

/* A Java frame as a person reads it: "Thread.sleep" for "java.lang.Thread.sleep(long)"
 * (the class without its package, the method without its arguments). */
static void java_name(const char *name, char *out, size_t len)
{
	char plain[512];
	vp_name__simple(name, plain, sizeof(plain));
	char *method = strrchr(plain, '.'), *cls = plain, *prev = plain;
	if (method)
		for (char *c = plain; c < method; c++)
			if (*c == '.') {
				prev = cls;
				cls = c + 1;
			}
	/* A lambda's hidden class "Outer$$Lambda$3.0x00007f0e2c001220": its name. */
	if (!strncmp(cls, "0x", 2) && prev < cls && method) {
		snprintf(out, len, "%.*s%s", (int)(cls - prev), prev, method + 1);
		return;
	}
	snprintf(out, len, "%s", cls);
}

/* Frames every wait passes through, whoever waits: libc's and HotSpot's primitives. */
static bool wait_machinery(const char *f)
{
	static const char *const pre[] = { "__futex", "futex", "__lll_", "__pthread", "pthread_", "___pthread",
					   "__GI___pthread", "__GI___lll", "__new_sem", "sem_", "__sem", "syscall",
					   "__nanosleep", "clock_nanosleep", "__clock_nanosleep", "os::Platform",
					   "os::naked_short", "Monitor::", "Mutex::", "PosixSemaphore::", "Semaphore::",
					   "Parker::", "LinuxWaitBarrier::", "GenericWaitBarrier::", "__poll", "__GI___poll",
					   "epoll_wait", "__GI_epoll", "__libc_", "__GI___libc", NULL };
	return starts_any(f, pre);
}

static int row_key(const struct vp_profile *p, const struct vp_stack *s, struct rowkey *k)
{
	uint32_t n = user_len(p, s), nj = 0, f[LABEL_FRAMES + 2], nf = 0, app[APP_FRAMES], napp = 0, inner = UINT32_MAX;
	char buf[2048];
	size_t o = 0;
	memset(k, 0, sizeof(*k));
	k->tag = "";
	/* The innermost Java frame (what the thread called: Thread.sleep, Unsafe.park) and
	 * the innermost frames of the application above it (whose call it was), with ".."
	 * for the JDK's frames between them. */
	for (uint32_t i = n; i-- > 0 && napp < APP_FRAMES;) {
		const char *name = p->frames[s->frames[i]].name;
		if (!java_layer(p->frames[s->frames[i]].layer))
			continue;
		if (inner == UINT32_MAX)
			inner = i;
		if (!vp_jdk_frame(name))
			app[napp++] = i;
	}
	if (napp) {
		k->java = true;
		for (uint32_t a = napp; a-- > 0;)
			f[nf++] = s->frames[app[a]];
		if (inner != app[0]) {
			bool between = false;
			for (uint32_t i = app[0] + 1; i < inner && !between; i++)
				between = java_layer(p->frames[s->frames[i]].layer);
			if (between)
				f[nf++] = UINT32_MAX;   /* ".." */
			f[nf++] = s->frames[inner];
		}
	} else if (inner != UINT32_MAX) {
		/* Only the JDK's frames (its own threads): the innermost ones. */
		for (uint32_t i = n; i-- > 0 && nj < LABEL_FRAMES;)
			if (java_layer(p->frames[s->frames[i]].layer))
				f[LABEL_FRAMES - 1 - nj++] = s->frames[i];
		k->java = true;
		memmove(f, f + LABEL_FRAMES - nj, nj * sizeof(*f));
		nf = nj;
	}
	const char *leaf = s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "";
	if (starts(leaf, "[blocked: ") || starts(leaf, "[idle: ") || starts(leaf, "[unmounted"))
		k->tag = leaf;
	if (!k->java) {
		/* Native frames: for a wait, those above libc's and HotSpot's waiting
		 * machinery (VMThread::wait_for_operation, not pthread_cond_timedwait). */
		uint32_t end = n;
		while (k->tag[0] && end > 1 && wait_machinery(p->frames[s->frames[end - 1]].name))
			end--;
		for (uint32_t i = end > LABEL_FRAMES ? end - LABEL_FRAMES : 0; i < end; i++)
			f[nf++] = s->frames[i];
		n = end;   /* ".." when frames lie above them */
	}
	buf[0] = '\0';
	if (!nf) {
		/* A kernel thread, or a stack without user frames: its innermost kernel
		 * function below the scheduler says what it was. */
		o += (size_t)snprintf(buf, sizeof(buf), "%s [kernel]", s->nframes ? p->frames[s->frames[0]].name : "[unknown]");
	} else {
		if (n > nf)
			o += (size_t)snprintf(buf, sizeof(buf), "..;");
		for (uint32_t i = 0; i < nf && o < sizeof(buf); i++) {
			const char *name = f[i] == UINT32_MAX ? ".." : p->frames[f[i]].name;
			char jn[512];
			if (k->java && f[i] != UINT32_MAX) {
				java_name(name, jn, sizeof(jn));
				name = jn;
			}
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? ";" : "", name);
		}
		k->bracket = nf == 1 && !k->java && f[0] != UINT32_MAX && p->frames[f[0]].name[0] == '[';
	}
	/* "[blocked: sleep]" reads "[sleep]": the column says it is blocked time. */
	if (k->tag[0] && o < sizeof(buf))
		snprintf(buf + o, sizeof(buf) - o, " [%s", starts(k->tag, "[blocked: ") ? k->tag + strlen("[blocked: ") : k->tag + 1);
	k->text = strdup(buf);
	return k->text ? 0 : -ENOMEM;
}

static const struct vp_profile *sort_prof;
static const struct rowkey *sort_keys;
static int cmp_group(const void *a, const void *b)
{
	uint32_t ia = *(const uint32_t *)a, ib = *(const uint32_t *)b;
	const struct vp_stack *x = &sort_prof->stacks[ia], *y = &sort_prof->stacks[ib];
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	const struct rowkey *kx = &sort_keys[ia], *ky = &sort_keys[ib];
	return strcmp(kx->text, ky->text);
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

/* Application threads first, then the JVM's own (GC, compiler, VM: idle most of the
 * time, and many), each by wall time. */
static int cmp_tsum(const void *a, const void *b)
{
	const struct tsum *x = a, *y = b;
	if (x->internal != y->internal)
		return x->internal ? 1 : -1;
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

static void label(struct vp_out *o, const struct vp_profile *p, const struct rowkey *k, const struct row *r)
{
	vp_out__puts(o, k->text);
	if (k->tag[0] || k->bracket || strstr(k->text, " [kernel]"))
		return;
	/* On CPU, runnable or steal: the largest of them names the row. */
	int big = VP_WALL_RUNNING;
	for (int i = 0; i < VP_WALL__COUNT; i++)
		if (r->part[i] > r->part[big])
			big = i;
	(void)p;
	vp_out__printf(o, " [%s]", vp_wall_part_name(big));
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

/* The host's share estimated from late sampler timers (common/steal_est.h): a line, not
 * a column, since it is no part of the sum. Where no steal clock runs the guest counted
 * that time as running (it is inside the running column); where one runs, the host's
 * preemptions are in the steal column too, seen a second way. */
static void est_header(const struct vp_profile *p, struct vp_out *o)
{
	int es = find_event(p, VP_STEAL_EST_EVENT);
	if (es < 0)
		return;
	uint64_t ns = 0;
	for (size_t i = 0; i < p->nstacks; i++)
		ns += p->stacks[i].weight[es];
	vp_out__printf(o, "# hypervisor (estimated): %.3f ms from sampler timers that fired late (an estimate, not a column: %s)\n",
		       (double)ns / 1e6, steal_unmeasured ? "with no steal clock the guest counted it as running"
							  : "with a steal clock, the host time in it is in the steal column too");
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
	struct rowkey *keys = calloc(p->nstacks ? p->nstacks : 1, sizeof(*keys));
	size_t nkeys = 0;
	struct tsum *ts = NULL;
	int ret = -ENOMEM;
	size_t nidx = 0;
	if (!idx || !rows || !keys)
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
		if (row_key(p, s, &keys[i]))
			goto cleanup;
		nkeys = i + 1;
		if (vp_jvm_thread_kind(s->comm))
			t->internal = true;
		if (starts(keys[i].tag, "[idle: "))
			t->idle += s->weight[wall];
		idx[nidx++] = (uint32_t)i;
	}
	ts = malloc((tt.n ? tt.n : 1) * sizeof(*ts));
	if (!ts)
		goto cleanup;
	size_t nt = 0;
	uint64_t all_steal = 0;
	for (size_t i = 0; i < tt.cap; i++)
		if (tt.t[i].used) {
			/* Named as one of HotSpot's, or idle as one most of the time (the
			 * launcher's thread, a renamed one). */
			tt.t[i].internal |= tt.t[i].idle * 2 > tt.t[i].wall;
			ts[nt++] = tt.t[i];
			all_steal += tt.t[i].part[VP_WALL_STEAL];
		}
	vp_sort(ts, nt, sizeof(*ts), cmp_tsum);
	sort_prof = p;
	sort_keys = keys;
	vp_sort(idx, nidx, sizeof(*idx), cmp_group);

	vp_out__puts(o, "# wall time per thread and per stack: running + runnable + blocked + steal = wall\n");
	vp_out__puts(o, "# running: on CPU (sampled per stack; scaled to the switch tracer's exact time less steal per thread)\n");
	vp_out__puts(o, "# runnable: waiting on a run queue (preempted, or woken and not yet running)\n");
	vp_out__puts(o, "# blocked: sleep, park, wait, lock, io, io wait (poll/read), other wait or uninterruptible; steal: the hypervisor had the vCPU\n");
	vp_out__puts(o, "#   a JVM's own threads waiting for work are [idle: GC worker|compiler|VM|launcher]; [jvm: ...]: held by HotSpot\n");
	vp_out__puts(o, "# each thread's rows: its innermost Java frames (else native frames) and what they were doing;\n");
	vp_out__puts(o, "# application threads first, then the JVM's own\n");
	vp_out__puts(o, "# all figures in milliseconds (ms) of time\n");
	steal_header(p, o, all_steal);
	est_header(p, o);
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
		if (t->internal && (i == 0 || !ts[i - 1].internal))
			vp_out__puts(o, "# the JVM's own threads (GC, compiler, VM, launcher):\n");
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
			label(o, p, &keys[rows[k].first], &rows[k]);
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
	for (size_t i = 0; keys && i < nkeys; i++)
		free(keys[i].text);
	free(keys);
	return ret;
}
