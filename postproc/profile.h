/* The aggregated profile: what postproc builds from a session (or several) and what
 * every report writer reads. Frames are interned; a stack is a list of frame ids,
 * root first, with one count and one weight per recorded event. */
#ifndef VIPROF_PROFILE_H
#define VIPROF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/container.h"
#include "common/layers.h"

struct vp_frame {
	const char *name;       /* symbol or method; never NULL ("[unknown]" only when the image is unknown too) */
	const char *image;      /* path or "[kernel.kallsyms]", "[jit]", module name; may be "" */
	const char *build_id;   /* hex, or "" */
	const char *file;       /* source file where known, or "" */
	uint64_t addr;          /* image-relative address of the first sample that named it, 0 if n/a */
	uint32_t line;
	uint8_t layer;          /* enum vp_layer */
	uint8_t tier;           /* a compiled Java method's (VP_LAYER_JIT) compile tier, part of
				 * its identity like the layer: VP_TIER_*; 0 = unknown or n/a */
};

/* Tiers: HotSpot's compile level (1-3 C1, 4 C2) with VP_TIER_OSR for an on-stack
 * replacement compilation. */
#define VP_TIER_C2  4u
#define VP_TIER_OSR 0x80u
static inline unsigned vp_tier_level(uint8_t tier) { return tier & 0x7fu; }
static inline bool vp_tier_is_c1(uint8_t tier) { return vp_tier_level(tier) >= 1 && vp_tier_level(tier) <= 3; }
/* "C1", "C2", "C1 OSR", ...; "" when unknown. */
const char *vp_tier_name(uint8_t tier);

struct vp_prof_event {
	char name[64];          /* "cpu-clock", "page-faults", "steal" */
	char unit[16];          /* "nanoseconds" for time-based events, else "events" */
};

struct vp_stack {
	uint32_t *frames;       /* frame ids, root first */
	uint32_t nframes;
	uint32_t pid, tid;
	const char *comm;       /* thread name */
	uint64_t *samples;      /* per event: number of samples */
	uint64_t *weight;       /* per event: sum of periods (events or ns) */
};

struct vp_meta_kv { char *key, *value; };

/* Where the samples were, address by address (pprof's Mapping and Location; the code is
 * in profile_loc.c). Optional: stacks added without locations (steal, synthetic tests)
 * have none, and writers fall back to one location per frame for them. */
struct vp_mapping {
	uint64_t start, limit, offset;  /* limit 0: unknown, writers take the span of its locations */
	const char *file;               /* path, "[jit]", "[kernel.kallsyms]", "[vdso]", ... */
	const char *build_id;           /* hex, or "" */
	uint32_t pid;                   /* 0 for the kernel and the hypervisor */
	bool exe;                       /* the process's main executable */
};
struct vp_location {
	uint32_t mapping;               /* index in mappings, UINT32_MAX = none */
	uint64_t addr;                  /* absolute; a caller's is its return address - 1 */
	uint32_t *frames, *lines;       /* frame ids innermost (inlined) first, each one's line here */
	uint32_t nframes;
};
struct vp_loc_stack {
	uint32_t *locs; uint32_t nlocs; /* location ids, leaf first */
	uint32_t stack;                 /* the p->stacks entry these samples are part of */
	uint64_t *samples, *weight;     /* per event, as in vp_stack */
};

/* A thread's exact times from the switch tracer (VP_REC_THREAD_TIME), for the wall
 * view: on-CPU from its switches rather than from samples. Sessions merged add up. */
struct vp_thread_times {
	uint32_t pid, tid;
	uint64_t oncpu_ns;        /* includes steal_ns (the guest clock runs on) */
	uint64_t steal_ns;
	uint64_t switches;
	uint64_t vthread_ns;      /* its sampled on-CPU time that report --vthreads gave to the
				   * virtual threads it carried (postproc/vthreads.h) */
};

/* When samples were taken, for the HTML report's time strip: appended by the loader
 * only when asked (vp_session_opts.times), one entry per sample record. An off-CPU sum
 * (a thread's waits of one stack, summed by the switch tracer) is an interval: its
 * samples are spread over [t, t + dur) by vp_span_share, in the strip as in report
 * --time, rather than piled where the wait ended. Merges and views carry them along
 * with the stacks they belong to. Times count from the session's time zero
 * (common/timezero.h: when sampling started). */
struct vp_sample_time {
	uint64_t t : 56;          /* ns since time zero: the sample, or its interval's start */
	uint64_t event : 8;
	uint64_t dur;             /* the interval's length in ns; 0 for a sample */
	uint32_t stack;           /* index in stacks */
	uint32_t samples;         /* 24 bytes a sample: a large session has millions */
};

/* Each sample record's own time and weight, for the JFR writer's events (real start times
 * and durations): appended by the loader only when asked (vp_session_opts.spans), one
 * entry per record, CPU samples, allocations, lock waits and off-CPU intervals alike.
 * Merges and views carry them along with their stacks, as the times above. */
struct vp_sample_span {
	uint64_t end;             /* CLOCK_MONOTONIC ns: when it was taken, or its wait ended */
	uint64_t weight;          /* its weight: ns waited (lock, off-CPU), bytes (alloc), events */
	uint32_t stack;           /* index in stacks */
	uint8_t event;
	uint8_t flags;            /* VP_SPAN_* */
	uint16_t reserved;
};
/* One interval of the time it weighs, [end - weight, end): a lock wait, a virtual thread's
 * wait, an off-CPU interval the tracer kept apart; not a sum of several. */
#define VP_SPAN_ONE_INTERVAL 0x1u

/* A moment the time strip marks: a JVM's code-map epoch boundary (the GC or the address
 * reuse that began the epoch), for the HTML report. */
struct vp_time_mark {
	uint64_t t;               /* ns since its recording's time zero */
	uint32_t pid;
	char label[48];           /* "GC 17 (full, G1)", "reuse" */
};

struct vp_profile {
	struct vp_frame *frames;  size_t nframes;
	struct vp_stack *stacks;  size_t nstacks;
	struct vp_prof_event events[8]; int nevents;
	struct vp_meta_kv *meta;  size_t nmeta;   /* session metadata, in recorded order */
	uint64_t lost;            /* samples lost while recording */
	bool incomplete;          /* a session ended without its END record (crash/kill) */
	char *warnings;           /* newline-separated notes for the report, or NULL */
	void *priv;               /* interning tables */
	struct vp_mapping *mappings;     size_t nmappings;
	struct vp_location *locations;   size_t nlocations;
	struct vp_loc_stack *loc_stacks; size_t nloc_stacks;
	void *loc_priv;           /* their interning tables (profile_loc.c) */
	struct vp_thread_times *threads; size_t nthreads;  /* exact times, when recorded */
	void *containers;         /* each process's container (containers.c) */
	struct vp_sample_time *times; size_t ntimes, timescap;  /* when recorded, see above */
	struct vp_time_mark *marks; size_t nmarks, markscap;    /* with times */
	struct vp_sample_span *spans; size_t nspans, spanscap;  /* when asked, see above */
};

/* A process's container, from the session's VP_REC_CONTAINER records. */
struct vp_proc_container {
	uint32_t pid, nspid;
	char *cgroup;
	struct vp_container_id c;   /* id "" on the host */
};

/* Containers (containers.c). set: the latest record for a pid wins; 0 or -ENOMEM. */
int vp_profile__set_container(struct vp_profile *p, uint32_t pid, uint32_t nspid, const char *cgroup,
			      const struct vp_container_id *c);
const struct vp_proc_container *vp_profile__container(const struct vp_profile *p, uint32_t pid);   /* or NULL */
const char *vp_profile__container_id(const struct vp_profile *p, uint32_t pid);   /* "" on the host or unknown */
size_t vp_profile__containers(const struct vp_profile *p, const struct vp_proc_container **out);
int vp_profile__merge_containers(struct vp_profile *dst, const struct vp_profile *src);
void vp_profile__free_containers(struct vp_profile *p);

/* Java code no code map names, in a HotSpot JVM (the process maps libjvm.so): known to
 * be Java's (compiled, the interpreter or a stub), so never "[unknown]". */
#define VP_FRAME_JAVA_NO_AGENT "[java code: JVM without the agent]"
#define VP_FRAME_JAVA_UNMAPPED "[java code: in no code map]"

/* Why a frame is "[unknown]" (its image says): the address was in no recorded mapping
 * (image ""), in anonymous memory of a process that is no JVM ("[anon]": code another
 * runtime generated), or the sample had no stack at all ("[no stack]"). */
enum vp_unknown { VP_UNKNOWN_NO_MAPPING, VP_UNKNOWN_ANON, VP_UNKNOWN_NO_STACK, VP_UNKNOWN__COUNT };
/* Samples of event ev whose stack holds an "[unknown]" frame, by the reason of the
 * leaf-most one, into why[]; returns their sum. all (may be NULL) gets every sample. */
uint64_t vp_profile__unknowns(const struct vp_profile *p, int ev, uint64_t why[VP_UNKNOWN__COUNT], uint64_t *all);
/* A one-line account of them ("[unknown] frames in 12 of 9000 samples (0.13%): 10 in no
 * recorded mapping (...), 2 ..."), malloc'd; NULL when there are none (or no memory). */
char *vp_profile__unknowns_line(const struct vp_profile *p, int ev);

struct vp_profile *vp_profile__new(void);
void vp_profile__free(struct vp_profile *p);   /* accepts NULL */
/* Whether any stack holds a sample of any event (a report of nothing says so instead). */
bool vp_profile__has_samples(const struct vp_profile *p);
/* Registers an event; returns its index or -errno. Same name twice returns the same index. */
int vp_profile__add_event(struct vp_profile *p, const char *name, const char *unit);
/* Interns a frame by (layer, tier, name, image); strings are copied. Returns its id, or
 * UINT32_MAX on allocation failure. */
uint32_t vp_profile__frame(struct vp_profile *p, const struct vp_frame *f);
/* The same, from its fields (NULL image, build_id or file: ""). */
uint32_t vp_profile__add_frame(struct vp_profile *p, uint8_t layer, const char *name, const char *image,
			       const char *build_id, uint64_t addr, const char *file, uint32_t line);
/* Adds samples to the stack (frames root first) of (pid, tid, comm); identical stacks
 * merge. Returns 0 or -errno. */
int vp_profile__add(struct vp_profile *p, const uint32_t *frames, uint32_t n, uint32_t pid,
		    uint32_t tid, const char *comm, int event, uint64_t samples, uint64_t weight);
/* Adds a thread's exact times (summed with what (pid, tid) had). 0 or -ENOMEM. */
int vp_profile__thread_times(struct vp_profile *p, const struct vp_thread_times *t);
const struct vp_thread_times *vp_profile__find_thread(const struct vp_profile *p, uint32_t pid, uint32_t tid);
void vp_profile__set_meta(struct vp_profile *p, const char *key, const char *value);
const char *vp_profile__meta(const struct vp_profile *p, const char *key);
/* Adds n to the number in the meta value key (sessions merged into one profile sum). */
void vp_profile__meta_add(struct vp_profile *p, const char *key, uint64_t n);
/* True when the session says no steal clock ran while it was recorded (meta "steal.clock"
 * is "none", set by the loader from the session's own steal snapshots and switch tracer
 * through vp_steal_clock__ran): views then print VP_STEAL_NOT_MEASURED, never a 0. */
bool vp_profile__steal_unmeasured(const struct vp_profile *p);
void vp_profile__warn(struct vp_profile *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Merges src into dst (events matched by name), scaling src's counts by 1 (merge). */
int vp_profile__merge(struct vp_profile *dst, const struct vp_profile *src);
/* vp_profile__add that also returns the stack's index in *stack (may be NULL). */
int vp_profile__add_stack(struct vp_profile *p, const uint32_t *frames, uint32_t n, uint32_t pid, uint32_t tid,
			  const char *comm, int event, uint64_t samples, uint64_t weight, uint32_t *stack);

/* Records that samples of stack (an index from vp_profile__add_stack) were taken at t
 * (ns since time zero). 0 or -ENOMEM. */
int vp_profile__add_time(struct vp_profile *p, uint32_t stack, int event, uint64_t t, uint64_t samples);
/* The same for samples spread over the interval [t, t + dur) (ns since time zero). */
int vp_profile__add_time_span(struct vp_profile *p, uint32_t stack, int event, uint64_t t, uint64_t dur, uint64_t samples);
/* The one rule that places an interval's samples in time: of samples spread evenly
 * over [start, start + dur), those in [a, b), rounded so that the parts of any
 * partition of the interval (the HTML strip's buckets, a --time window and the rest)
 * sum to samples exactly. An instant (dur 0) is all in [a, b) or none. A pure function. */
uint64_t vp_span_share(uint64_t start, uint64_t dur, uint64_t samples, uint64_t a, uint64_t b);
/* States the session's time zero (common/timezero.h) in the meta, as every report's
 * header says it: "time_zero_monotonic_ns" and "time_zero" (what it is: "sampling
 * start", or "recorder start" for a session older than its sampling start's record).
 * Sessions merged into one profile each count from their own zero, and it says so. */
void vp_profile__set_time_zero(struct vp_profile *p, uint64_t t0, bool sampling);
/* Records sample records' own time and weight (see struct vp_sample_span). 0 or -ENOMEM. */
int vp_profile__add_span(struct vp_profile *p, uint32_t stack, int event, uint64_t end, uint64_t weight,
			 unsigned flags);
/* Adds a mark (label copied, cut to fit). 0 or -ENOMEM. */
int vp_profile__add_mark(struct vp_profile *p, uint64_t t, uint32_t pid, const char *label);
/* Copies src's sample times (and marks, and spans) into dst: smap maps src stack indices to dst's (UINT32_MAX:
 * dropped), evmap events. 0 or -ENOMEM. */
int vp_profile__merge_times(struct vp_profile *dst, const struct vp_profile *src, const uint32_t *smap,
			    const int *evmap);

/* Addresses (profile_loc.c). Interns a mapping by (pid, file, start, offset); strings are
 * copied; a mapping seen again with exe set keeps it. Returns its index or UINT32_MAX. */
uint32_t vp_profile__mapping(struct vp_profile *p, const struct vp_mapping *m);
/* Interns a location by (mapping, addr, frames, lines); frames innermost first. Returns
 * its index or UINT32_MAX. */
uint32_t vp_profile__location(struct vp_profile *p, uint32_t mapping, uint64_t addr, const uint32_t *frames,
			      const uint32_t *lines, uint32_t n);
/* Adds samples of stack (an index from vp_profile__add_stack) at these locations, leaf
 * first. Returns 0 or -errno. */
int vp_profile__add_locs(struct vp_profile *p, uint32_t stack, const uint32_t *locs, uint32_t n, int event,
			 uint64_t samples, uint64_t weight);
/* For vp_profile__merge: copies src's mappings, locations and location stacks into dst;
 * fmap maps src frame ids to dst's, smap src stack indices to dst's, evmap events. */
int vp_profile__merge_locs(struct vp_profile *dst, const struct vp_profile *src, const uint32_t *fmap,
			   const uint32_t *smap, const int *evmap);
void vp_profile__free_locs(struct vp_profile *p);

#endif
