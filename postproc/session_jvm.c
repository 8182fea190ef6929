/* The agent's own samples, added after the stream's: sampled allocations and the
 * waits of virtual threads, each with the JVMTI stack the agent recorded. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "postproc/session_jvm.h"
#include "postproc/session_resolver.h"
#include "postproc/sched_state.h"

/* What the agent's samples are added with: the timeline (JVMs, names, the report's
 * filters), the weights (the time event, the span sampled) and the profile. */
struct jvm_ctx {
	struct vp_timeline *tl;
	const struct vp_weights *w;
	struct vp_profile *p;
};

#if HAVE_JIT_INDEX
/* Frames the agent recorded through JVMTI (jmethodID and bci, innermost first, at
 * cm->alloc_frames[first ..]) into fr, root first, at most VP_MAX_OUT_FRAMES - 1 (room for a
 * leaf). JVMTI does not say which frames were compiled: they are drawn in the JIT layer. */
static uint32_t jvmti_frames(const struct jvm_ctx *x, const struct vp_codemap *cm, size_t first, uint32_t nframes, uint32_t *fr)
{
	uint32_t n = 0, nf = nframes < VP_MAX_OUT_FRAMES - 1 ? nframes : VP_MAX_OUT_FRAMES - 1;
	/* Root first: the outermost caller is the last JVMTI frame. */
	for (uint32_t k = nf; k-- > 0;) {
		const struct vp_cm_alloc_frame *f = &cm->alloc_frames[first + k];
		const struct vp_cm_name_info *ni = vp_codemap__name(cm, f->method_id);
		struct vp_frame vf = { .name = ni ? ni->name : "[unknown Java method]", .image = "[jit]",
				       .build_id = "", .file = ni && ni->file ? ni->file : "",
				       .line = ni ? vp_codemap__line(ni, f->bci) : 0, .layer = VP_LAYER_JIT };
		if ((fr[n] = vp_profile__frame(x->p, &vf)) == UINT32_MAX)
			break;
		n++;
	}
	return n;
}

/* The machinery a virtual thread unmounts through (continuation yield, VirtualThread's
 * park and sleep, the JDK's internal park bridge): what it waits for is above it. */
static bool unmount_machinery(const char *f)
{
	static const char *const pre[] = { "jdk.internal.vm.Continuation", "java.lang.VirtualThread.",
					   "jdk.internal.misc.VirtualThreads.", "java.lang.System$", NULL };
	for (int i = 0; pre[i]; i++)
		if (!strncmp(f, pre[i], strlen(pre[i])))
			return true;
	return false;
}

/* Each time a virtual thread of JVM pid waited unmounted (postproc/vthreads.h), as an
 * "off-cpu" stack of its own report thread (only in sessions recorded with --off-cpu,
 * which have that event): the Java stack it waited at under a leaf "[unmounted: STATE]",
 * STATE from its Java frames (vp_sched_java_state; "other wait" when they do not say), or
 * "[unmounted: short wait]" with no stack for one the agent found too short to walk.
 * Unmounted time is no kernel thread's: the tracer never sees it. */
static int add_vthread_waits(const struct jvm_ctx *x, uint32_t pid, const struct vp_codemap *cm)
{
	const struct vp_vt_wait *w;
	size_t nw = vp_vthreads__waits(vp_timeline__vthreads(x->tl, pid), &w);
	int ev = -1;
	for (int e = 0; e < x->p->nevents; e++)
		if (!strcmp(x->p->events[e].name, "off-cpu"))
			ev = e;
	if (ev < 0 || !vp_timeline__container_selected(x->tl, pid))
		return 0;
	uint64_t period = vp_weights__sample_ns(x->w);
	/* Only what falls between the session's first and last sample, as for the kernel
	 * threads' off-CPU time: an agent attached to a running JVM writes from before the
	 * sampling starts until it notices the recording's end, and on to the JVM's exit when
	 * it does not (a -p run's code map went on 4.5 s past the session's last record). */
	uint64_t lo, hi;
	vp_weights__sampled(x->w, &lo, &hi);
	for (size_t i = 0; i < nw; i++) {
		uint32_t vtid = vp_vthread_tid(w[i].id), fr[VP_MAX_OUT_FRAMES];
		char label[300], detail[64], leaf[128];
		const char *names[VP_MAX_OUT_FRAMES];
		uint64_t from = w[i].from > lo ? w[i].from : lo, to = w[i].to < hi ? w[i].to : hi;
		/* A wait counts in a --time window by its part inside it, as the kernel
		 * threads' off-CPU intervals do (resolve_sample in session.c). */
		const struct vp_session_opts *o = vp_timeline__opts(x->tl);
		uint64_t t0 = vp_timeline__t0(x->tl), wa = t0 + (uint64_t)(o->t_from * 1e9),
			 wb = o->t_to > 0 ? t0 + (uint64_t)(o->t_to * 1e9) : UINT64_MAX;
		from = from > wa ? from : wa;
		to = to < wb ? to : wb;
		vp_vthreads__label(w[i].id, w[i].name, label, sizeof(label));
		if (to <= from || !vp_timeline__selects_tid(x->tl, vtid) ||
		    !vp_timeline__comm_selected(x->tl, label, NULL))
			continue;
		uint32_t n = jvmti_frames(x, cm, w[i].first, w[i].nframes, fr);
		int nn = 0, skip = 0;
		for (uint32_t k = n; k-- > 0;)
			names[nn++] = x->p->frames[fr[k]].name;   /* leaf first */
		while (skip < nn && unmount_machinery(names[skip]))
			skip++;
		int state = vp_sched_java_state(VP_SCHED_BLOCKED_WAIT, names + skip, nn - skip, detail, sizeof(detail));
		const char *sf = vp_sched_state_frame(state), *colon = strchr(sf, ':');
		if (w[i].short_wait)
			snprintf(leaf, sizeof(leaf), "[unmounted: short wait]");
		else
			snprintf(leaf, sizeof(leaf), "[unmounted%.*s%s%s]", colon ? (int)strcspn(colon, "]") : 0,
				 colon ? colon : "", detail[0] ? ": " : "", detail);
		struct vp_frame lf = { .name = leaf, .image = "[vthread]", .build_id = "", .file = "",
				       .layer = VP_LAYER_KERNEL };
		if ((fr[n] = vp_profile__frame(x->p, &lf)) == UINT32_MAX)
			return -ENOMEM;
		uint64_t weight = to - from, nsamp = (weight + period / 2) / period;
		uint32_t sid;
		int ret = vp_profile__add_stack(x->p, fr, n + 1, pid, vtid, label, ev, nsamp ? nsamp : 1, weight, &sid);
		if (!ret && o->times)   /* spread over the wait in the HTML strip */
			ret = vp_profile__add_time_span(x->p, sid, ev, from - t0, weight, nsamp ? nsamp : 1);
		if (!ret && o->spans)
			ret = vp_profile__add_span(x->p, sid, ev, to, weight, VP_SPAN_ONE_INTERVAL);
		if (ret)
			return ret;
	}
	return 0;
}
#endif

/* Sampled allocations and contended locks (record -e alloc, -e lock; issue 25): each
 * ALLOC_SAMPLE of each JVM's code map is a stack of event "alloc" (bytes: the bytes it
 * stands for), each LOCK_SAMPLE one of event "lock" (nanoseconds waited), its Java frames
 * from the agent's method names and the allocated class, or the lock's, as the leaf
 * frame, like async-profiler's allocation and lock profiles. JVMTI does not say which
 * frames were compiled: they are drawn in the JIT layer, the class in the JVM layer. */
int vp_session_jvm__add(const char *dir, struct vp_timeline *tl, const struct vp_weights *w, struct vp_profile *p)
{
#if HAVE_JIT_INDEX
	const struct jvm_ctx ctx = { tl, w, p }, *x = &ctx;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_JIT_DIR);
	DIR *d = opendir(path);
	struct dirent *de;
	int evs[2] = { -1, -1 }, ret = 0;
	if (!d)
		return 0;
	while (!ret && (de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);
		/* --pid first: a JVM left out is not worth reading its code map for. */
		if (*end || end == de->d_name || !pid || pid > UINT32_MAX || !vp_timeline__selects_pid(x->tl, (uint32_t)pid))
			continue;
		const struct vp_codemap *cm = vp_timeline__codemap(x->tl, (uint32_t)pid);
		if (cm && cm->vm[0] && vp_timeline__opts(x->tl)->spans) {
			/* Its name and version, for JFR's jdk.JVMInformation. */
			char key[48], v[32];
			snprintf(key, sizeof(key), "jvm.%lu.vm", pid);
			vp_profile__set_meta(x->p, key, cm->vm);
			/* An agent loaded with the JVM began its code map as the JVM started. */
			if (cm->created_ns && !(cm->flags & VP_CM_META_LATE_ATTACH)) {
				snprintf(key, sizeof(key), "jvm.%lu.start_ns", pid);
				snprintf(v, sizeof(v), "%llu", (unsigned long long)cm->created_ns);
				vp_profile__set_meta(x->p, key, v);
			}
		}
		if (cm && cm->nvthreads && (ret = add_vthread_waits(x, (uint32_t)pid, cm)))
			break;
		if (!cm || !cm->nallocs)
			continue;
		/* Not what ended before the time zero: an attached agent records from before
		 * the sampling starts, and those waits, clamped to the zero, went into
		 * --time 0,x (6.5 s of lock waits in the first 0.5 s of a -p recording). What
		 * the agent records after the sampling ends stays: it is told to stop then
		 * (record_jvm__end), and an allocation profile with few CPU samples would lose
		 * its last allocations to a "last sample" bound. */
		uint64_t t0 = vp_timeline__t0(x->tl);
		for (size_t i = 0; i < cm->nallocs && !ret; i++) {
			const struct vp_cm_alloc_info *a = &cm->allocs[i];
			bool lk = a->kind == VP_CM_LOCK_SAMPLE;
			int *ev = &evs[lk];
			if (*ev < 0 && (*ev = vp_profile__add_event(x->p, lk ? "lock" : "alloc", lk ? "nanoseconds" : "bytes")) < 0) {
				ret = *ev;
				break;
			}
			if (!vp_timeline__selects(x->tl, (uint32_t)pid, a->tid) || !vp_timeline__in_window(x->tl, a->time) ||
			    a->time < t0)
				continue;
			const char *kcomm, *comm = vp_timeline__thread_name(x->tl, (uint32_t)pid, a->tid, a->time, &kcomm);
			if (!vp_timeline__comm_selected(x->tl, comm, kcomm))
				continue;
			uint32_t fr[VP_MAX_OUT_FRAMES];
			uint32_t n = jvmti_frames(x, cm, a->first, a->nframes, fr);
			char cls[512];
			if (lk && !a->klass[0])
				snprintf(cls, sizeof(cls), "[unknown lock]");
			else
				vp_cm_class_name(a->klass, cls, sizeof(cls));
			struct vp_frame cf = { .name = cls, .image = lk ? "[lock]" : "[class]", .build_id = "", .file = "",
					       .layer = VP_LAYER_JVM };
			if ((fr[n] = vp_profile__frame(x->p, &cf)) == UINT32_MAX) {
				ret = -ENOMEM;
				break;
			}
			n++;
			uint32_t sid;
			ret = vp_profile__add_stack(x->p, fr, n, (uint32_t)pid, a->tid, comm ? comm : "", *ev, 1, a->weight, &sid);
			/* A lock sample is one wait, ending at its time; an allocation, a moment. */
			if (!ret && vp_timeline__opts(x->tl)->spans)
				ret = vp_profile__add_span(x->p, sid, *ev, a->time, a->weight, lk ? VP_SPAN_ONE_INTERVAL : 0);
		}
	}
	closedir(d);
	return ret;
#else
	(void)dir, (void)tl, (void)w, (void)p;
	return 0;
#endif
}
