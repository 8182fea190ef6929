/* The session loader's second pass: each sample's addresses into frames. Kernel
 * addresses through the KSYM table, hypervisor ones through --hv-syms, user ones through
 * the mapping at the sample's time and its ELF symbols, or for code outside files the
 * JVM's code maps (maps/jit_index.h); interpreted frames through the agent's Method*
 * records. An address is looked up once in the mappings and once in the JIT index; the
 * address cache keeps what it resolved to. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "common/paths.h"
#include "common/util.h"
#include "postproc/elfsym.h"
#include "postproc/hvsyms.h"
#include "postproc/ksyms.h"
#include "postproc/session_resolver.h"
#include "postproc/sched_state.h"

#define MAX_JIT_DEPTH 16

/* What one sampled address resolved to: its frames (innermost first, more than one for
 * inlined JIT code) and its pprof location. Resolving names the frames by strings
 * (symbol, image, file), and hashing those for every frame of every sample was most of
 * a report's time; an address seen again with the same key takes this instead. The key
 * holds everything the resolution depends on: for user code the mapping found at the
 * sample's time and the JIT method (or stub) that owned the address then, so that a
 * remapped library or reused code-cache memory is resolved afresh. */
struct addr_ent {
	uint64_t ip;
	const void *map, *jit;       /* identity of the resolution; NULL when not used */
	uint32_t pid;
	uint8_t kind;                /* AC_* (0 = empty slot) */
	uint8_t caller;
	uint8_t n;                   /* frames, 1..MAX_JIT_DEPTH */
	uint8_t unmapped;            /* counted as a user frame in no mapping */
	uint8_t flat_wrong;          /* a leaf in JIT code: FLAT_OK, or FLAT_WRONG when a flat map names it
				      * after another method; 0 otherwise */
	uint32_t loc;                /* pprof location, or UINT32_MAX */
	uint32_t first;              /* frames at pool[first..first+n) */
	uint64_t t_lo, t_hi;         /* AC_SPAN: the times at which the answer holds */
};
/* AC_SPAN entries are keyed by (pid, ip, caller) alone and hold the last answer with
 * the span of times it is sure for (the mapping live, the JIT method in its epoch): a
 * repeated address at such a time skips the mapping search and the code-map lookup. */
enum { AC_KERNEL = 1, AC_HYPERVISOR = 2, AC_USER = 3, AC_INTERP = 4, AC_SPAN = 5 };
struct addr_cache {
	struct addr_ent *t; size_t size, used;
	uint32_t *pool; size_t npool, cappool;
};

/* What a mapping resolves through, worked out once per mapping: its ELF, whether the
 * ELF is the file that was recorded (build-ids), and the recorded build-id in hex. */
struct mapinfo {
	struct vp_elf *elf;
	bool trusted;
	char recbid[41];
	struct mapinfo *next;
};

struct vp_resolver {
	struct vp_profile *p;
	const struct vp_session_opts *o;
	struct vp_timeline *tl;      /* what ran where and when: read, never changed */
	struct vp_ksyms *ks;
	struct vp_elfsym *elfs;
	struct vp_hvsyms *hv;        /* --hv-syms */
	struct addr_cache ac;
	struct mapinfo *mapinfos;    /* owned; vp_map.priv points at them */
	struct vp_elf *vdso;         /* the recorded kernel's vDSO */
	bool vdso_tried;
	/* For pprof (profile_loc.c): the lines the JIT index gave for the frames
	 * user_frames returned last. */
	uint32_t jit_lines[MAX_JIT_DEPTH]; int jit_n;
	uint64_t unmapped;           /* user frames in no known mapping: leaves (the sampled address) */
	uint64_t unmapped_callers;   /* ... and return addresses the walk found there (a misread frame) */
	uint64_t user_leaves;        /* sampled user addresses resolved, mapped or not */
	uint64_t exec_stacks;        /* samples taken inside execve: the user stack is the caller's */
	uint64_t jit_leaves, flat_wrong; /* samples whose leaf is JIT code; of them, misnamed by a flat map */
	uint64_t walk[VP_WALK__COUNT]; /* samples with a user stack, by how its walk ended */
};

struct vp_resolver *vp_resolver__new(struct vp_timeline *tl, struct vp_profile *p, const struct vp_session_opts *o,
				     const char *debug_root)
{
	struct vp_resolver *rs = calloc(1, sizeof(*rs));
	if (!rs)
		return NULL;
	rs->tl = tl;
	rs->p = p;
	rs->o = o;
	rs->ks = vp_ksyms__new();
	rs->elfs = vp_elfsym__new(debug_root);
	if (!rs->ks || !rs->elfs) {
		vp_resolver__free(rs);
		errno = ENOMEM;
		return NULL;
	}
	return rs;
}

void vp_resolver__free(struct vp_resolver *rs)
{
	if (!rs)
		return;
	for (struct mapinfo *mi = rs->mapinfos, *n; mi; mi = n) {
		n = mi->next;
		free(mi);
	}
	free(rs->ac.t);
	free(rs->ac.pool);
	vp_ksyms__free(rs->ks);
	vp_hvsyms__close(rs->hv);
	vp_elfsym__free(rs->elfs);
	free(rs);
}

int vp_resolver__hv_syms(struct vp_resolver *rs, const char *path, char *err, size_t errlen)
{
	char why[512];
	rs->hv = vp_hvsyms__open(path, why, sizeof(why));
	if (!rs->hv) {
		int ret = -errno;
		vp_set_err(err, errlen, "%s", why);
		return ret;
	}
	return 0;
}

int vp_resolver__ksym(struct vp_resolver *rs, const struct vp_ksym *k, size_t blen)
{
	if (blen <= sizeof(*k))
		return 0;
	char module[sizeof(k->module) + 1], name[512];
	memcpy(module, k->module, sizeof(k->module));
	module[sizeof(k->module)] = '\0';
	size_t n = blen - sizeof(*k);
	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, k->name, n);
	name[n] = '\0';
	return vp_ksyms__add(rs->ks, k->addr, k->size, module, name);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}


static bool is_file_backed(const char *f)
{
	return f[0] == '/' && f[1] != '/' && strncmp(f, "/memfd:", 7) && strncmp(f, "/dev/zero", 9) &&
	       strncmp(f, "/SYSV", 5);
}

static uint32_t kernel_frame(struct vp_resolver *rs, uint64_t ip, bool caller)
{
	char name[64];
	const struct vp_ksym_entry *k = vp_ksyms__find(rs->ks, caller ? ip - 1 : ip);
	if (!k) {
		snprintf(name, sizeof(name), "[kernel] 0x%llx", (unsigned long long)ip);
		return vp_profile__add_frame(rs->p, VP_LAYER_KERNEL, name, "[kernel.kallsyms]", "", ip, "", 0);
	}
	char image[64 + 2];
	if (k->module[0])
		snprintf(image, sizeof(image), "[%s]", k->module);
	else
		snprintf(image, sizeof(image), "[kernel.kallsyms]");
	return vp_profile__add_frame(rs->p, VP_LAYER_KERNEL, k->name, image, "", k->addr, "", 0);
}

/* A sample in Xen itself: taken in hypervisor mode, or at an address in Xen's range
 * (the x86 kernel reports samples that interrupted Xen as kernel mode, so the address
 * is what tells). Named from --hv-syms when given. */
static uint32_t hypervisor_frame(struct vp_resolver *rs, uint64_t ip)
{
	char name[64];
	if (rs->hv) {
		uint64_t off;
		const char *s = vp_hvsyms__name(rs->hv, ip, &off);
		if (s)
			return vp_profile__add_frame(rs->p, VP_LAYER_HYPERVISOR, s, base_name(rs->o->hv_syms), "", ip - off, "", 0);
	}
	snprintf(name, sizeof(name), "[hypervisor] 0x%llx", (unsigned long long)ip);
	return vp_profile__add_frame(rs->p, VP_LAYER_HYPERVISOR, name, "[hypervisor]", "", ip, "", 0);
}

/* In Xen PMU mode "all", dom0 also receives samples of other domains (guest kernel
 * or guest user mode). Their addresses mean nothing in dom0's kallsyms or processes,
 * and perf does not say which domain it was: one frame per mode, under its own
 * thread name, so that they are counted and never misnamed. */
static bool other_domain(const struct vp_sample *s)
{
	return s->mode == VP_MODE_GUEST_KERNEL || s->mode == VP_MODE_GUEST_USER;
}

/* A mapping of the agent copy the recorder makes in a container's /tmp: ".../libviprof-jvmti.so",
 * "(deleted)" once removed. */
static bool is_agent_copy(const char *filename)
{
	static const char name[] = "/libviprof-jvmti.so";
	const char *p = strstr(filename, name);
	return p && (p[sizeof(name) - 1] == '\0' || !strcmp(p + sizeof(name) - 1, " (deleted)"));
}

static struct mapinfo *map_info(struct vp_resolver *rs, struct vp_map *m, uint32_t pid)
{
	if (m->priv_set)
		return m->priv;
	m->priv_set = true;
	struct mapinfo *mi = calloc(1, sizeof(*mi));
	if (!mi)
		return NULL;
	mi->next = rs->mapinfos;
	rs->mapinfos = mi;
	m->priv = mi;
	struct vp_elf *e = vp_elfsym__open(rs->elfs, m->filename, pid);
	mi->elf = e;
	if (m->build_id_size)
		vp_hex(m->build_id, m->build_id_size, mi->recbid);
	/* viprof's own agent, loaded into a JVM in a container from a copy the recorder
	 * made there and removed once loaded (recorder/jvm_attach.c): that copy is gone,
	 * and this viprof's agent is the same file when the recorded build-id says so (issue 33:
	 * "cannot open for symbols" on every container report). */
	if (!e && is_agent_copy(m->filename)) {
		const char *agent = viprof_agent_path();
		struct vp_elf *a = agent ? vp_elfsym__open(rs->elfs, agent, 0) : NULL;
		if (a && mi->recbid[0] && !strcmp(vp_elf__build_id(a), mi->recbid))
			mi->elf = e = a;
	}
	mi->trusted = e != NULL;
	if (e && mi->recbid[0]) {
		const char *now = vp_elf__build_id(e);
		if (now[0] && strcmp(now, mi->recbid)) {
			/* The symbols of another build name the wrong functions: offsets only. */
			mi->trusted = false;
			vp_profile__warn(rs->p, "%s: file changed since recording (build-id %s, recorded %s); "
					 "its symbols are not trusted: copy the recorded file back or "
					 "place its debug file under the debug root", vp_elf__path(e), now, mi->recbid);
		}
	} else if (!e) {
		vp_profile__warn(rs->p, "%s: cannot open for symbols (%s); its frames show as image+offset",
				 m->filename, strerror(errno));
	}
	return mi;
}

/* The vDSO is not on disk. The recorder saves its image in the session (VP_REC_VDSO);
 * a session from before that is named with the vDSO mapped into this process, which is
 * the same image when the report runs on the kernel release that recorded. */
static struct vp_elf *vdso_elf(struct vp_resolver *rs)
{
	if (rs->vdso_tried)
		return rs->vdso;
	rs->vdso_tried = true;
	size_t ilen;
	const void *rec = vp_timeline__vdso_image(rs->tl, &ilen);
	if (rec) {
		rs->vdso = vp_elfsym__open_memory(rs->elfs, "[vdso] (recorded)", rec, ilen);
		return rs->vdso;
	}
	const char *k = vp_profile__meta(rs->p, "kernel");
	struct utsname u;
	size_t len;
	const void *img;
	if (!k || uname(&u) || strcmp(k, u.release) || !(img = vp_vdso_image(&len)))
		return NULL;
	rs->vdso = vp_elfsym__open_memory(rs->elfs, "[vdso] (this process)", img, len);
	return rs->vdso;
}

/* What one user address was looked up to at a sample's time: its mapping, and for code
 * outside files the JIT index's answer. Each is searched for once per uncached address;
 * the cache key, the frames and the pprof location all come from these. */
struct user_hit {
	struct vp_map *m;
#if HAVE_JIT_INDEX
	struct vp_jit_hit jit;
#endif
	bool jit_looked;             /* jit holds the index's answer */
};

/* Appends the frames for one user address, leaf first; returns how many. */
static int user_frames(struct vp_resolver *rs, uint32_t pid, uint64_t t, uint64_t ip, bool caller,
		       const struct user_hit *h, uint32_t *out, int max)
{
	uint64_t look = caller ? ip - 1 : ip;
	struct vp_map *m = h->m;
	char name[512];
	if (m && is_file_backed(m->filename)) {
		struct mapinfo *mi = map_info(rs, m, pid);
		struct vp_elf *e = mi ? mi->elf : NULL;
		bool trusted = mi && mi->trusted;
		const char *recbid = mi ? mi->recbid : "";
		const char *bname = base_name(m->filename);
		uint8_t layer = !strncmp(bname, "libjvm.so", 9) ? VP_LAYER_JVM : VP_LAYER_NATIVE;
		uint64_t vaddr, off;
		if (trusted && vp_elf__to_vaddr(e, m->start, m->pgoff, look, &vaddr)) {
			const char *s = vp_elf__symbol(e, vaddr, &off);
			if (s) {
				out[0] = vp_profile__add_frame(rs->p, layer, s, m->filename, vp_elf__build_id(e), vaddr - off, "", 0);
				return 1;
			}
			vp_elf__to_vaddr(e, m->start, m->pgoff, ip, &vaddr);
			snprintf(name, sizeof(name), "%s+0x%llx", bname, (unsigned long long)vaddr);
			out[0] = vp_profile__add_frame(rs->p, layer, name, m->filename, vp_elf__build_id(e), vaddr, "", 0);
			return 1;
		}
		uint64_t foff = ip - m->start + m->pgoff;
		snprintf(name, sizeof(name), "%s+0x%llx", bname, (unsigned long long)foff);
		out[0] = vp_profile__add_frame(rs->p, layer, name, m->filename, recbid, foff, "", 0);
		return 1;
	}
	bool j = vp_timeline__jvm(rs->tl, pid);
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx = vp_timeline__jit(rs->tl, pid);
	if (idx) {
		struct vp_jit_frame jf[MAX_JIT_DEPTH];
		int cap = max < MAX_JIT_DEPTH ? max : MAX_JIT_DEPTH;
		int n = h->jit_looked ? vp_jit_index__expand(idx, &h->jit, ip, jf, cap)
				      : vp_jit_index__resolve(idx, ip, t, rs->o->map_mode_flat, jf, cap);
		for (int i = 0; i < n; i++) {
			/* The compiled method's frame carries its tier (issue 25): C1 and C2 code of
			 * one method are two frames, as in async-profiler's _[1] and _[j]. Whether
			 * it was an OSR compilation is left to 'maps show': a method's OSR and
			 * normal code as two rows of every report told little and split its time. */
			uint8_t tier = jf[i].level >= 1 && jf[i].level <= VP_TIER_C2 ? jf[i].level : 0;
			struct vp_frame vf = { .name = jf[i].name ? jf[i].name : "[unknown]", .image = "[jit]",
					       .build_id = "", .file = jf[i].file ? jf[i].file : "",
					       .line = jf[i].line, .layer = jf[i].layer, .tier = tier };
			out[i] = vp_profile__frame(rs->p, &vf);
			rs->jit_lines[i] = jf[i].line;  /* this address's lines; the frame keeps its first */
		}
		rs->jit_n = n;
		if (n > 0)
			return n;
	}
#else
	(void)j;
#endif
	struct vp_elf *vd;
	uint64_t vv, voff;
	const char *vs;
	if (m && !strcmp(m->filename, "[vdso]") && (vd = vdso_elf(rs)) && vp_elf__to_vaddr(vd, m->start, 0, look, &vv) &&
	    (vs = vp_elf__symbol(vd, vv, &voff))) {
		out[0] = vp_profile__add_frame(rs->p, VP_LAYER_NATIVE, vs, "[vdso]", vp_elf__build_id(vd), vv - voff, "", 0);
		return 1;
	}
	if (m && m->filename[0] == '[' && strncmp(m->filename, "[anon", 5)) {  /* [vdso], [vsyscall] */
		snprintf(name, sizeof(name), "%s+0x%llx", m->filename, (unsigned long long)(ip - m->start));
		out[0] = vp_profile__add_frame(rs->p, VP_LAYER_NATIVE, name, m->filename, "", ip - m->start, "", 0);
		return 1;
	}
	if (!m && caller)
		rs->unmapped_callers++;
	else if (!m)
		rs->unmapped++;
	/* Anonymous memory in a HotSpot JVM is Java code (compiled, the interpreter or a
	 * stub) even when no code map names it: saying so is better than "[unknown]", and
	 * says what to do (the agent). Other anonymous code is another runtime's. */
	if (m && j && vp_timeline__hotspot(rs->tl, pid, t) > 0) {
		out[0] = vp_profile__add_frame(rs->p, VP_LAYER_JIT, vp_timeline__jvm_has_maps(rs->tl, pid) ? VP_FRAME_JAVA_UNMAPPED : VP_FRAME_JAVA_NO_AGENT, "[jit]",
				   "", 0, "", 0);
		return 1;
	}
	out[0] = vp_profile__add_frame(rs->p, VP_LAYER_UNKNOWN, "[unknown]", m ? "[anon]" : "", "", 0, "", 0);
	return 1;
}

/* An interpreted frame the walker identified: named by its Method* through the agent's
 * METHOD_PTR records at the sample's time, with the line of its bytecode index (also
 * left in rs->jit_lines[0]: the frame keeps the line of its first sample, a location
 * needs this one's). */
/* The method id a Method* named at t (0 when unknown): with the bci, all that an
 * interpreted frame resolves through. */
static uint64_t interp_method(struct vp_resolver *rs, uint32_t pid, uint64_t t, const struct vp_java_frame *jf)
{
#if HAVE_JIT_INDEX
	const struct vp_codemap *cm = vp_timeline__codemap(rs->tl, pid);
	return cm ? vp_codemap__method_at(cm, jf->method, t) : 0;
#else
	(void)rs, (void)pid, (void)t, (void)jf;
	return 0;
#endif
}

static uint32_t interpreted_frame(struct vp_resolver *rs, uint32_t pid, uint64_t t, const struct vp_java_frame *jf)
{
	rs->jit_lines[0] = 0;
#if HAVE_JIT_INDEX
	const struct vp_codemap *cm = vp_timeline__codemap(rs->tl, pid);
	uint64_t id = cm ? vp_codemap__method_at(cm, jf->method, t) : 0;
	const struct vp_cm_name_info *n = id ? vp_codemap__name(cm, id) : NULL;

	if (n && n->name && n->name[0]) {
		rs->jit_lines[0] = vp_codemap__line(n, jf->bci);
		return vp_profile__add_frame(rs->p, VP_LAYER_INTERPRETED, n->name, "[jit]", "", 0, n->file ? n->file : "",
				 rs->jit_lines[0]);
	}
#endif
	return vp_profile__add_frame(rs->p, VP_LAYER_INTERPRETED, "[interpreted]", "[jit]", "", 0, "", 0);
}

static uint64_t ac_hash(const struct addr_ent *k)
{
	uint64_t h = k->ip * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)k->pid << 16 | (uint64_t)k->kind << 8 | k->caller) * 0xff51afd7ed558ccdull;
	h ^= (uint64_t)(uintptr_t)k->map * 0xc4ceb9fe1a85ec53ull;
	h ^= (uint64_t)(uintptr_t)k->jit * 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static bool ac_eq(const struct addr_ent *a, const struct addr_ent *b)
{
	return a->ip == b->ip && a->kind == b->kind && a->caller == b->caller && a->pid == b->pid &&
	       a->map == b->map && a->jit == b->jit;
}

static const struct addr_ent *ac_find(const struct addr_cache *c, const struct addr_ent *k)
{
	if (!c->size)
		return NULL;
	size_t mask = c->size - 1;
	for (size_t j = ac_hash(k) & mask; c->t[j].kind; j = (j + 1) & mask)
		if (ac_eq(&c->t[j], k))
			return &c->t[j];
	return NULL;
}

static void ac_insert(struct addr_cache *c, const struct addr_ent *e)
{
	size_t mask = c->size - 1, j = ac_hash(e) & mask;
	while (c->t[j].kind)
		j = (j + 1) & mask;
	c->t[j] = *e;
	c->used++;
}

/* Remembers what key resolved to. The cache only saves time: when memory runs short it
 * stops growing and the loader resolves as before. */
static void ac_put(struct addr_cache *c, const struct addr_ent *key, const uint32_t *frames, int n, uint32_t loc,
		   bool unmapped)
{
	if (n <= 0 || n > MAX_JIT_DEPTH)
		return;
	for (int i = 0; i < n; i++)
		if (frames[i] == UINT32_MAX)
			return;
	if ((c->used + 1) * 2 > c->size) {
		size_t size = c->size ? c->size * 2 : 4096;
		struct addr_ent *t = calloc(size, sizeof(*t)), *old = c->t;
		if (!t)
			return;
		size_t oldsize = c->size;
		c->t = t;
		c->size = size;
		c->used = 0;
		for (size_t i = 0; i < oldsize; i++)
			if (old[i].kind)
				ac_insert(c, &old[i]);
		free(old);
	}
	if (c->npool + (size_t)n > UINT32_MAX ||
	    vp_grow((void **)&c->pool, &c->cappool, c->npool + (size_t)n, sizeof(*c->pool)))
		return;
	struct addr_ent e = *key;
	e.n = (uint8_t)n;
	e.unmapped = unmapped;
	e.loc = loc;
	e.first = (uint32_t)c->npool;
	memcpy(c->pool + c->npool, frames, (size_t)n * sizeof(*frames));
	c->npool += (size_t)n;
	ac_insert(c, &e);
}

/* Sets key's span entry to frames and loc for the times [lo, hi). */
static void span_put(struct addr_cache *c, struct addr_ent *key, uint64_t lo, uint64_t hi, const uint32_t *frames,
		     int n, uint32_t loc)
{
	struct addr_ent *e = (struct addr_ent *)ac_find(c, key);
	key->t_lo = lo;
	key->t_hi = hi;
	if (!e) {
		ac_put(c, key, frames, n, loc, false);
		return;
	}
	if (n <= 0 || n > MAX_JIT_DEPTH || c->npool + (size_t)n > UINT32_MAX ||
	    vp_grow((void **)&c->pool, &c->cappool, c->npool + (size_t)n, sizeof(*c->pool))) {
		e->t_lo = 1;   /* no room for the new answer: forget the old one */
		e->t_hi = 0;
		return;
	}
	for (int i = 0; i < n; i++)
		if (frames[i] == UINT32_MAX)
			return;
	memcpy(c->pool + c->npool, frames, (size_t)n * sizeof(*frames));
	e->first = (uint32_t)c->npool;
	c->npool += (size_t)n;
	e->n = (uint8_t)n;
	e->loc = loc;
	e->t_lo = lo;
	e->t_hi = hi;
	e->flat_wrong = key->flat_wrong;
}

enum { FLAT_OK = 1, FLAT_WRONG = 2 };

/* A sample's leaf (frame 0 of its user stack) in JIT code (v nonzero), and whether a
 * flat map would have named it after another method. */
static void count_flat(struct vp_resolver *rs, int frame, uint8_t v)
{
	if (frame != 0 || !v)
		return;
	rs->jit_leaves++;
	rs->flat_wrong += v == FLAT_WRONG;
}

/* Whether a flat code map (the last method ever loaded at each address, as in a
 * perf-PID.map) names the JIT address ip other than epoch_name: code freed at a GC and
 * its address reused by a later method. Only asked on a cache miss. */
static bool flat_misnames(struct vp_resolver *rs, uint32_t pid, uint64_t ip, uint64_t t, const char *epoch_name)
{
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx = vp_timeline__jit(rs->tl, pid);
	struct vp_jit_frame jf[MAX_JIT_DEPTH];
	if (!idx || rs->o->map_mode_flat)
		return false;
	int n = vp_jit_index__resolve(idx, ip, t, true, jf, MAX_JIT_DEPTH);
	return n > 0 && jf[0].name && strcmp(jf[0].name, epoch_name);
#else
	(void)rs, (void)pid, (void)ip, (void)t, (void)epoch_name;
	return false;
#endif
}

/* The JIT method or stub that owned ip in pid at t, as vp_jit_index__owner names it,
 * and the span of times it surely did (*lo > *hi: none known); the index's answer is
 * kept in h for the frames. */
static const void *jit_owner(struct vp_resolver *rs, uint32_t pid, uint64_t ip, uint64_t t, struct user_hit *h,
			     uint64_t *lo, uint64_t *hi)
{
	*lo = 1;
	*hi = 0;
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx = vp_timeline__jit(rs->tl, pid);
	if (idx) {
		const void *owner = vp_jit_index__lookup(idx, ip, t, rs->o->map_mode_flat, &h->jit);
		h->jit_looked = true;
		*lo = h->jit.lo;
		*hi = h->jit.hi;
		return owner;
	}
#else
	(void)rs, (void)pid, (void)ip, (void)t, (void)h;
#endif
	return NULL;
}

/* The location of frames f[0..k-1] (innermost first) that the sampled address look
 * resolved to, for pprof: its mapping (vm, the one the sample's lookup found, for user
 * code; the kernel's or hypervisor's image otherwise) and the lines at this very address
 * (a frame keeps the line of the first address that named it). UINT32_MAX when none. */
static uint32_t frame_loc(struct vp_resolver *rs, uint32_t pid, uint64_t look, const uint32_t *f, int k, bool user,
			  const struct vp_map *vm)
{
	uint32_t lines[MAX_JIT_DEPTH];
	if (k <= 0 || k > MAX_JIT_DEPTH)
		return UINT32_MAX;
	for (int i = 0; i < k; i++) {
		if (f[i] == UINT32_MAX)
			return UINT32_MAX;
		lines[i] = rs->jit_n == k ? rs->jit_lines[i] : rs->p->frames[f[i]].line;
	}
	const struct vp_frame *fr = &rs->p->frames[f[k - 1]];
	struct vp_mapping m = { .file = fr->image, .build_id = fr->build_id, .pid = user ? pid : 0 };
	uint32_t mid = UINT32_MAX;
	if (user)
		vp_timeline__intern_exe(rs->tl, pid);
	if (user && strcmp(fr->image, "[jit]")) {
		if (vm && vm->filename[0] && strncmp(vm->filename, "[anon", 5)) {
			m.file = vm->filename;
			m.start = vm->start;
			m.limit = vm->start + vm->len;
			m.offset = vm->pgoff;
			mid = vp_profile__mapping(rs->p, &m);
		}
	} else if (fr->image[0]) {
		mid = vp_profile__mapping(rs->p, &m);
	}
	return vp_profile__location(rs->p, mid, look, f, lines, (uint32_t)k);
}

/* A stack being resolved: its frames leaf first, and its locations (out->locs). */
struct build {
	uint32_t f[VP_MAX_OUT_FRAMES];
	int n;
	uint32_t *locs;
	int nl;
};

/* The kernel's frames of s (or, for another domain's sample, one frame naming its mode). */
static void kernel_part(struct vp_resolver *rs, const struct vp_sample *s, struct build *b)
{
	if (other_domain(s)) {
		b->f[b->n++] = vp_profile__add_frame(rs->p, VP_LAYER_HYPERVISOR,
						     s->mode == VP_MODE_GUEST_KERNEL ? "[other domain: kernel]" : "[other domain: user]",
						     "[domU]", "", 0, "", 0);
		return;
	}
	for (int i = 0; i < s->nr_kernel && b->n < VP_MAX_OUT_FRAMES; i++) {
		bool hv = (i == 0 && s->mode == VP_MODE_HYPERVISOR) || vp_hvsyms__is_xen_addr(s->ips[i]);
		struct addr_ent key = { .ip = s->ips[i], .kind = hv ? AC_HYPERVISOR : AC_KERNEL, .caller = i > 0 };
		const struct addr_ent *e = ac_find(&rs->ac, &key);
		if (e) {
			b->f[b->n++] = rs->ac.pool[e->first];
			b->locs[b->nl++] = e->loc;
			continue;
		}
		if (hv)
			b->f[b->n++] = hypervisor_frame(rs, s->ips[i]);
		else
			b->f[b->n++] = kernel_frame(rs, s->ips[i], i > 0);
		b->locs[b->nl++] = frame_loc(rs, s->pid, i > 0 ? s->ips[i] - 1 : s->ips[i], b->f + b->n - 1, 1, false, NULL);
		ac_put(&rs->ac, &key, b->f + b->n - 1, 1, b->locs[b->nl - 1], false);
	}
}

/* A sample inside execve: the kernel is replacing the process's image, and the user
 * stack is still that of the program that called exec (for `viprof record -- CMD`,
 * viprof's own launcher), whose mappings this process never recorded. One frame says
 * so, instead of frames "in no recorded mapping" (issue 33). Returns whether it was. */
static bool exec_part(struct vp_resolver *rs, const struct vp_sample *s, struct build *b)
{
	bool in_exec = false;
	for (int i = 0; i < b->n && s->nr_user && !in_exec; i++) {
		const char *kn = b->f[i] == UINT32_MAX ? "" : rs->p->frames[b->f[i]].name;
		in_exec = strstr(kn, "sys_execve") || !strncmp(kn, "do_execveat_common", 18) || !strcmp(kn, "bprm_execve");
	}
	if (in_exec && b->n < VP_MAX_OUT_FRAMES) {
		uint32_t no_line = 0;
		b->f[b->n] = vp_profile__add_frame(rs->p, VP_LAYER_NATIVE, "[the program before exec]", "[exec]", "", 0, "", 0);
		/* For pprof, a location of its own without a mapping, like a state frame's:
		 * no address of the new image is the old program's. */
		b->locs[b->nl++] = b->f[b->n] == UINT32_MAX ? UINT32_MAX
							    : vp_profile__location(rs->p, UINT32_MAX, 0, b->f + b->n, &no_line, 1);
		b->n++;
		rs->exec_stacks++;
	}
	return in_exec;
}

/* An interpreted frame resolves through the method its Method* named at this time, and
 * its bytecode index. */
static void interp_address(struct vp_resolver *rs, uint32_t pid, uint64_t t, bool caller, uint64_t look,
			   const struct vp_java_frame *jf, struct build *b)
{
	struct addr_ent key = { .ip = look, .kind = AC_INTERP, .caller = caller, .pid = pid,
				.map = (const void *)(uintptr_t)interp_method(rs, pid, t, jf),
				.jit = (const void *)(uintptr_t)(uint32_t)jf->bci };
	const struct addr_ent *e = ac_find(&rs->ac, &key);
	if (e) {
		b->f[b->n++] = rs->ac.pool[e->first];
		b->locs[b->nl++] = e->loc;
		return;
	}
	b->f[b->n++] = interpreted_frame(rs, pid, t, jf);
	rs->jit_n = 1;
	b->locs[b->nl++] = frame_loc(rs, pid, look, b->f + b->n - 1, 1, true, NULL);
	rs->jit_n = 0;
	ac_put(&rs->ac, &key, b->f + b->n - 1, 1, b->locs[b->nl - 1], false);
}

/* User address ip, frame i of the user stack of pid at t: from the cache when an answer
 * holds, else through its mapping or the JIT method that owned it then. */
static void user_address(struct vp_resolver *rs, uint32_t pid, uint64_t t, int i, uint64_t ip, struct build *b)
{
	uint64_t look = i > 0 ? ip - 1 : ip;
	rs->user_leaves += i == 0;
	/* Seen at a time its last answer holds for: that answer. */
	struct addr_ent skey = { .ip = ip, .kind = AC_SPAN, .caller = i > 0, .pid = pid };
	const struct addr_ent *e = ac_find(&rs->ac, &skey);
	if (e && e->t_lo <= t && t < e->t_hi && b->n + e->n <= VP_MAX_OUT_FRAMES) {
		memcpy(b->f + b->n, rs->ac.pool + e->first, e->n * sizeof(*b->f));
		b->n += e->n;
		b->locs[b->nl++] = e->loc;
		count_flat(rs, i, e->flat_wrong);
		return;
	}
	/* The mapping at this time, and for code outside files the JIT method that
	 * owned the address then, are what the address resolves through. */
	struct addr_ent key = { .ip = ip, .kind = AC_USER, .caller = i > 0, .pid = pid };
	uint64_t lo, hi, jlo, jhi;
	struct user_hit uh = { .m = vp_timeline__map_at(rs->tl, pid, look, t, &lo, &hi) };
	const struct vp_map *vm = uh.m;
	key.map = vm;
	if (!(vm && is_file_backed(vm->filename))) {
		key.jit = jit_owner(rs, pid, ip, t, &uh, &jlo, &jhi);
		lo = jlo > lo ? jlo : lo;
		hi = jhi < hi ? jhi : hi;
	}
	int n0 = b->n;
	e = ac_find(&rs->ac, &key);
	if (e && b->n + e->n <= VP_MAX_OUT_FRAMES) {
		memcpy(b->f + b->n, rs->ac.pool + e->first, e->n * sizeof(*b->f));
		b->n += e->n;
		b->locs[b->nl++] = e->loc;
		if (key.caller)
			rs->unmapped_callers += e->unmapped;
		else
			rs->unmapped += e->unmapped;
		skey.flat_wrong = e->flat_wrong;
		count_flat(rs, i, e->flat_wrong);
		if (e->unmapped)
			return;   /* counted as unmapped each time: never by span */
	} else {
		uint64_t unmapped = rs->unmapped + rs->unmapped_callers;
		rs->jit_n = 0;
		b->n += user_frames(rs, pid, t, ip, i > 0, &uh, b->f + b->n, VP_MAX_OUT_FRAMES - b->n);
		b->locs[b->nl++] = frame_loc(rs, pid, look, b->f + n0, b->n - n0, true, vm);
		rs->jit_n = 0;
		/* What a flat map would call this leaf, when JIT code resolved it. */
		key.flat_wrong = skey.flat_wrong = i != 0 || !key.jit || b->n <= n0 ? 0
			: flat_misnames(rs, pid, ip, t, rs->p->frames[b->f[n0]].name) ? FLAT_WRONG : FLAT_OK;
		count_flat(rs, i, key.flat_wrong);
		if (VP_MAX_OUT_FRAMES - n0 < MAX_JIT_DEPTH)
			return;   /* cut short by the frame limit: not an answer to keep */
		bool none = rs->unmapped + rs->unmapped_callers != unmapped;
		ac_put(&rs->ac, &key, b->f + n0, b->n - n0, b->locs[b->nl - 1], none);
		if (none)
			return;   /* counted as unmapped each time: never by span */
	}
	if (lo <= t && t < hi)
		span_put(&rs->ac, &skey, lo, hi, b->f + n0, b->n - n0, b->locs[b->nl - 1]);
}

/* The user stack of s (blen: its record body's length), with the interpreted frames
 * the walker identified. */
static void user_part(struct vp_resolver *rs, const struct vp_sample *s, size_t blen, uint64_t t, struct build *b)
{
	/* Interpreted frames follow ips[]; entries that do not fit the record are ignored. */
	const struct vp_java_frame *jf = (const struct vp_java_frame *)(s->ips + s->nr_kernel + s->nr_user);
	size_t used = sizeof(*s) + 8 * ((size_t)s->nr_kernel + s->nr_user);
	int nj = (int)vp_sample_nr_java(s);
	if (used > blen || (blen - used) / sizeof(*jf) < (size_t)nj)
		nj = used > blen ? 0 : (int)((blen - used) / sizeof(*jf));
	int k = 0;
	for (int i = 0; i < s->nr_user && b->n < VP_MAX_OUT_FRAMES; i++) {
		struct vp_java_frame jcur;

		while (k < nj) {
			memcpy(&jcur, jf + k, sizeof(jcur));
			if (jcur.frame >= i)
				break;
			k++;
		}
		uint64_t ip = s->ips[s->nr_kernel + i];
		if (k < nj && jcur.frame == i) {
			k++;
			interp_address(rs, s->pid, t, i > 0, i > 0 ? ip - 1 : ip, &jcur, b);
			continue;
		}
		user_address(rs, s->pid, t, i, ip, b);
	}
}

/* What an off-CPU sample's thread was doing (enum vp_sched_state), with detail: names[]
 * are its frames' names, leaf first. */
static int sched_state(struct vp_resolver *rs, const struct vp_sample *s, uint64_t t, const char *comm,
		       const char *kcomm, const struct build *b, const char **names, char *detail, size_t dlen)
{
	int n = b->n;
	/* A Java thread's wait is named by its Java frames where they say more than the
	 * kernel (every Java sleep, park and monitor wait is a futex). */
	int state = vp_sched_java_state(s->sched_state, names, n, detail, dlen);
	if (state != s->sched_state || detail[0])
		return state;
	/* What Java did not name may be the JVM's own wait: a GC worker, a compiler
	 * thread or the VM thread waiting for work sleeps on a futex too, and is idle,
	 * not held by a lock (issue 33: 78% "lock" in a JVM without one contended). */
	state = vp_sched_jvm_state(state, comm, names, n, detail, dlen);
	if (state == s->sched_state && kcomm && kcomm != comm)
		state = vp_sched_jvm_state(state, kcomm, names, n, detail, dlen);
	/* A futex wait below libjvm's own code (and above the thread's Java frames,
	 * if any) is one of HotSpot's locks or condition variables, not the
	 * application's: e.g. asking CompileBroker for a compile. */
	if (state == VP_SCHED_BLOCKED_LOCK) {
		bool jvm = false;
		for (int i = 0; i < n && !jvm; i++) {
			uint8_t ly = b->f[i] == UINT32_MAX ? VP_LAYER_UNKNOWN : rs->p->frames[b->f[i]].layer;
			if (ly == VP_LAYER_JIT || ly == VP_LAYER_INTERPRETED || ly == VP_LAYER_INLINED)
				break;
			jvm = ly == VP_LAYER_JVM;
		}
		if (jvm)
			state = VP_SCHED_BLOCKED_JVM;
	}
	/* The java launcher's first thread waits in pthread_join for the JVM's
	 * main thread all along; it blocked before the recorder's unwind rules
	 * were in place, so its stack rarely reaches JLI_Launch to say so. */
	if (state == s->sched_state && (state == VP_SCHED_BLOCKED_LOCK || state == VP_SCHED_BLOCKED_SLEEP || state == VP_SCHED_BLOCKED_WAIT) &&
	    s->tid == s->pid && kcomm && !strcmp(kcomm, "java") &&
	    vp_timeline__maps_file(rs->tl, s->pid, t, "libjvm.so")) {
		bool java = false;
		for (int i = 0; i < n && !java; i++)
			java = b->f[i] != UINT32_MAX && (rs->p->frames[b->f[i]].layer == VP_LAYER_JIT ||
							 rs->p->frames[b->f[i]].layer == VP_LAYER_INTERPRETED);
		if (!java) {
			state = VP_SCHED_IDLE;
			snprintf(detail, dlen, "launcher");
		}
	}
	return state;
}

/* Off-CPU and steal sums end in a frame saying what the thread was doing. It has no
 * address: for pprof it is a location of its own without a mapping, above the stack's
 * own locations (a 0x0 address in the kernel's or a made-up mapping would claim code
 * that is not there). */
static void state_part(struct vp_resolver *rs, const struct vp_sample *s, uint64_t t, const char *comm,
		       const char *kcomm, struct build *b)
{
	if (!s->sched_state || s->sched_state >= VP_SCHED__COUNT)
		return;
	bool by_addr = b->nl > 0 || b->n == 0;
	if (b->n == VP_MAX_OUT_FRAMES) {
		b->n--;
		by_addr = false;  /* the frames lost their root; the locations did not */
	}
	const char *names[VP_MAX_OUT_FRAMES];
	char detail[64], label[128];
	for (int i = 0; i < b->n; i++)
		names[i] = b->f[i] == UINT32_MAX ? "" : rs->p->frames[b->f[i]].name;
	int state = sched_state(rs, s, t, comm, kcomm, b, names, detail, sizeof(detail));
	const char *sf = vp_sched_state_frame(state);
	if (detail[0]) {
		snprintf(label, sizeof(label), "%.*s: %s]", (int)strlen(sf) - 1, sf, detail);
		sf = label;
	}
	memmove(b->f + 1, b->f, (size_t)b->n * sizeof(b->f[0]));
	b->f[0] = s->sched_state == VP_SCHED_STEAL
			? vp_profile__add_frame(rs->p, VP_LAYER_HYPERVISOR, "[hypervisor: steal]", "[hypervisor]", "", 0, "", 0)
			: s->sched_state == VP_SCHED_HV_ESTIMATED   /* kept apart from measured steal */
			? vp_profile__add_frame(rs->p, VP_LAYER_HYPERVISOR_EST, sf, "[hypervisor]", "", 0, "", 0)
			: vp_profile__add_frame(rs->p, VP_LAYER_KERNEL, sf, "[kernel.kallsyms]", "", 0, "", 0);
	b->n++;
	if (by_addr && b->nl < VP_MAX_OUT_FRAMES && b->f[0] != UINT32_MAX) {
		uint32_t no_line = 0;
		memmove(b->locs + 1, b->locs, (size_t)b->nl * sizeof(b->locs[0]));
		b->locs[0] = vp_profile__location(rs->p, UINT32_MAX, 0, b->f, &no_line, 1);
		b->nl++;
	} else {
		b->nl = 0;
	}
}

int vp_resolver__sample(struct vp_resolver *rs, const struct vp_sample *s, size_t blen, uint64_t t, const char *comm,
			const char *kcomm, struct vp_resolved *out)
{
	struct build b = { .locs = out->locs };
	out->comm = other_domain(s) ? "[other domains]" : comm;
	rs->jit_n = 0;
	kernel_part(rs, s, &b);
	if (s->nr_user)
		rs->walk[s->walk_end < VP_WALK__COUNT ? s->walk_end : VP_WALK_UNKNOWN]++;
	bool in_exec = exec_part(rs, s, &b);
	if (!other_domain(s) && !in_exec)
		user_part(rs, s, blen, t, &b);
	state_part(rs, s, t, out->comm, kcomm, &b);
	if (b.n == 0)
		b.f[b.n++] = vp_profile__add_frame(rs->p, VP_LAYER_UNKNOWN, "[unknown]", "[no stack]", "", 0, "", 0);
	for (int i = 0; i < b.n; i++) {
		if (b.f[i] == UINT32_MAX)
			return -ENOMEM;
		out->frames[b.n - 1 - i] = b.f[i];
	}
	out->n = (uint32_t)b.n;
	/* A frame without a location (no image) leaves the sample to the frame view, which
	 * pprof falls back to. */
	for (int i = 0; i < b.nl; i++)
		if (b.locs[i] == UINT32_MAX)
			b.nl = 0;
	out->nlocs = (uint32_t)b.nl;
	return 0;
}

void vp_resolver__finish(struct vp_resolver *rs)
{
	struct vp_profile *p = rs->p;
	/* How the user stacks ended, summed over merged sessions. */
	for (int k = 0; k < VP_WALK__COUNT; k++) {
		char key[48];

		snprintf(key, sizeof(key), "stack_end.%s", vp_walk_end_name(k));
		if (!rs->walk[k] && !vp_profile__meta(p, key))
			continue;
		vp_profile__meta_add(p, key, rs->walk[k]);
	}
	/* Samples in JIT code, and how many of them a flat map would have misnamed: what
	 * the epochs are for, summed over merged sessions. */
	if (rs->jit_leaves) {
		vp_profile__meta_add(p, "jit.leaf_samples", rs->jit_leaves);
		vp_profile__meta_add(p, "jit.flat_misnamed", rs->flat_wrong);
	}
	/* Frames outside every recorded mapping: anonymous code no agent described, or a
	 * mapping whose record was lost (the LOST count says whether any were). */
	/* Below one in a thousand of the sampled addresses (a mapping made and removed
	 * between two records: one sample in a JVM's 4 s had it) the count is kept in the
	 * meta, not said on every report: a warning says something about the profile. */
	if (rs->unmapped)
		vp_profile__meta_add(p, "unmapped.user_leaves", rs->unmapped);
	if (rs->unmapped && (p->lost || rs->unmapped * 1000 >= rs->user_leaves))
		vp_profile__warn(p, "%llu sampled user addresses were in no recorded mapping and show as [unknown]%s",
				 (unsigned long long)rs->unmapped,
				 p->lost ? " (some records were lost while recording)"
					 : " (code outside every mapping the recorder saw: a mapping made and removed "
					   "between two of its records, or a process it did not follow from its start)");
	/* A return address outside every mapping is the walk's error, not unknown code:
	 * a frame it misread (a JVM stub that uses its frame pointer register for data). */
	if (rs->unmapped_callers)
		vp_profile__warn(p, "%llu return addresses that stack walks found were in no mapping of their process "
				 "(frames the walker misread, e.g. in a JVM stub that uses the frame pointer register for "
				 "data); those callers show as [unknown]", (unsigned long long)rs->unmapped_callers);
}
