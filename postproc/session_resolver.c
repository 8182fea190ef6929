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
#include "postproc/session.h"
#include "postproc/session_internal.h"
#include "postproc/wall.h"

static bool is_file_backed(const char *f)
{
	return f[0] == '/' && f[1] != '/' && strncmp(f, "/memfd:", 7) && strncmp(f, "/dev/zero", 9) &&
	       strncmp(f, "/SYSV", 5);
}

static uint32_t kernel_frame(struct loader *l, uint64_t ip, bool caller)
{
	char name[64];
	const struct vp_ksym_entry *k = vp_ksyms__find(l->ks, caller ? ip - 1 : ip);
	if (!k) {
		snprintf(name, sizeof(name), "[kernel] 0x%llx", (unsigned long long)ip);
		return vp_profile__add_frame(l->p, VP_LAYER_KERNEL, name, "[kernel.kallsyms]", "", ip, "", 0);
	}
	char image[64 + 2];
	if (k->module[0])
		snprintf(image, sizeof(image), "[%s]", k->module);
	else
		snprintf(image, sizeof(image), "[kernel.kallsyms]");
	return vp_profile__add_frame(l->p, VP_LAYER_KERNEL, k->name, image, "", k->addr, "", 0);
}

/* A sample in Xen itself: taken in hypervisor mode, or at an address in Xen's range
 * (the x86 kernel reports samples that interrupted Xen as kernel mode, so the address
 * is what tells). Named from --hv-syms when given. */
static uint32_t hypervisor_frame(struct loader *l, uint64_t ip)
{
	char name[64];
	if (l->hv) {
		uint64_t off;
		const char *s = vp_hvsyms__name(l->hv, ip, &off);
		if (s)
			return vp_profile__add_frame(l->p, VP_LAYER_HYPERVISOR, s, base_name(l->o->hv_syms), "", ip - off, "", 0);
	}
	snprintf(name, sizeof(name), "[hypervisor] 0x%llx", (unsigned long long)ip);
	return vp_profile__add_frame(l->p, VP_LAYER_HYPERVISOR, name, "[hypervisor]", "", ip, "", 0);
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

static struct mapinfo *map_info(struct loader *l, struct vp_map *m, uint32_t pid)
{
	if (m->priv_set)
		return m->priv;
	m->priv_set = true;
	struct mapinfo *mi = calloc(1, sizeof(*mi));
	if (!mi)
		return NULL;
	mi->next = l->mapinfos;
	l->mapinfos = mi;
	m->priv = mi;
	struct vp_elf *e = vp_elfsym__open(l->elfs, m->filename, pid);
	mi->elf = e;
	if (m->build_id_size)
		vp_hex(m->build_id, m->build_id_size, mi->recbid);
	/* viprof's own agent, loaded into a JVM in a container from a copy the recorder
	 * made there and removed once loaded (recorder/jvm_attach.c): that copy is gone,
	 * and this viprof's agent is the same file when the recorded build-id says so (issue 33:
	 * "cannot open for symbols" on every container report). */
	if (!e && is_agent_copy(m->filename)) {
		const char *agent = viprof_agent_path();
		struct vp_elf *a = agent ? vp_elfsym__open(l->elfs, agent, 0) : NULL;
		if (a && mi->recbid[0] && !strcmp(vp_elf__build_id(a), mi->recbid))
			mi->elf = e = a;
	}
	mi->trusted = e != NULL;
	if (e && mi->recbid[0]) {
		const char *now = vp_elf__build_id(e);
		if (now[0] && strcmp(now, mi->recbid)) {
			/* The symbols of another build name the wrong functions: offsets only. */
			mi->trusted = false;
			vp_profile__warn(l->p, "%s: file changed since recording (build-id %s, recorded %s); "
					 "its symbols are not trusted: copy the recorded file back or "
					 "place its debug file under the debug root", vp_elf__path(e), now, mi->recbid);
		}
	} else if (!e) {
		vp_profile__warn(l->p, "%s: cannot open for symbols (%s); its frames show as image+offset",
				 m->filename, strerror(errno));
	}
	return mi;
}

/* The vDSO is not on disk. The recorder saves its image in the session (VP_REC_VDSO);
 * a session from before that is named with the vDSO mapped into this process, which is
 * the same image when the report runs on the kernel release that recorded. */
static struct vp_elf *vdso_elf(struct loader *l)
{
	if (l->vdso_tried)
		return l->vdso;
	l->vdso_tried = true;
	size_t ilen;
	const void *rec = vp_timeline__vdso_image(l->tl, &ilen);
	if (rec) {
		l->vdso = vp_elfsym__open_memory(l->elfs, "[vdso] (recorded)", rec, ilen);
		return l->vdso;
	}
	const char *k = vp_profile__meta(l->p, "kernel");
	struct utsname u;
	size_t len;
	const void *img;
	if (!k || uname(&u) || strcmp(k, u.release) || !(img = vp_vdso_image(&len)))
		return NULL;
	l->vdso = vp_elfsym__open_memory(l->elfs, "[vdso] (this process)", img, len);
	return l->vdso;
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
static int user_frames(struct loader *l, uint32_t pid, uint64_t t, uint64_t ip, bool caller,
		       const struct user_hit *h, uint32_t *out, int max)
{
	uint64_t look = caller ? ip - 1 : ip;
	struct vp_map *m = h->m;
	char name[512];
	if (m && is_file_backed(m->filename)) {
		struct mapinfo *mi = map_info(l, m, pid);
		struct vp_elf *e = mi ? mi->elf : NULL;
		bool trusted = mi && mi->trusted;
		const char *recbid = mi ? mi->recbid : "";
		const char *bname = base_name(m->filename);
		uint8_t layer = !strncmp(bname, "libjvm.so", 9) ? VP_LAYER_JVM : VP_LAYER_NATIVE;
		uint64_t vaddr, off;
		if (trusted && vp_elf__to_vaddr(e, m->start, m->pgoff, look, &vaddr)) {
			const char *s = vp_elf__symbol(e, vaddr, &off);
			if (s) {
				out[0] = vp_profile__add_frame(l->p, layer, s, m->filename, vp_elf__build_id(e), vaddr - off, "", 0);
				return 1;
			}
			vp_elf__to_vaddr(e, m->start, m->pgoff, ip, &vaddr);
			snprintf(name, sizeof(name), "%s+0x%llx", bname, (unsigned long long)vaddr);
			out[0] = vp_profile__add_frame(l->p, layer, name, m->filename, vp_elf__build_id(e), vaddr, "", 0);
			return 1;
		}
		uint64_t foff = ip - m->start + m->pgoff;
		snprintf(name, sizeof(name), "%s+0x%llx", bname, (unsigned long long)foff);
		out[0] = vp_profile__add_frame(l->p, layer, name, m->filename, recbid, foff, "", 0);
		return 1;
	}
	bool j = vp_timeline__jvm(l->tl, pid);
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx = vp_timeline__jit(l->tl, pid);
	if (idx) {
		struct vp_jit_frame jf[MAX_JIT_DEPTH];
		int cap = max < MAX_JIT_DEPTH ? max : MAX_JIT_DEPTH;
		int n = h->jit_looked ? vp_jit_index__expand(idx, &h->jit, ip, jf, cap)
				      : vp_jit_index__resolve(idx, ip, t, l->o->map_mode_flat, jf, cap);
		for (int i = 0; i < n; i++) {
			/* The compiled method's frame carries its tier (issue 25): C1 and C2 code of
			 * one method are two frames, as in async-profiler's _[1] and _[j]. Whether
			 * it was an OSR compilation is left to 'maps show': a method's OSR and
			 * normal code as two rows of every report told little and split its time. */
			uint8_t tier = jf[i].level >= 1 && jf[i].level <= VP_TIER_C2 ? jf[i].level : 0;
			struct vp_frame vf = { .name = jf[i].name ? jf[i].name : "[unknown]", .image = "[jit]",
					       .build_id = "", .file = jf[i].file ? jf[i].file : "",
					       .line = jf[i].line, .layer = jf[i].layer, .tier = tier };
			out[i] = vp_profile__frame(l->p, &vf);
			l->jit_lines[i] = jf[i].line;  /* this address's lines; the frame keeps its first */
		}
		l->jit_n = n;
		if (n > 0)
			return n;
	}
#else
	(void)j;
#endif
	struct vp_elf *vd;
	uint64_t vv, voff;
	const char *vs;
	if (m && !strcmp(m->filename, "[vdso]") && (vd = vdso_elf(l)) && vp_elf__to_vaddr(vd, m->start, 0, look, &vv) &&
	    (vs = vp_elf__symbol(vd, vv, &voff))) {
		out[0] = vp_profile__add_frame(l->p, VP_LAYER_NATIVE, vs, "[vdso]", vp_elf__build_id(vd), vv - voff, "", 0);
		return 1;
	}
	if (m && m->filename[0] == '[' && strncmp(m->filename, "[anon", 5)) {  /* [vdso], [vsyscall] */
		snprintf(name, sizeof(name), "%s+0x%llx", m->filename, (unsigned long long)(ip - m->start));
		out[0] = vp_profile__add_frame(l->p, VP_LAYER_NATIVE, name, m->filename, "", ip - m->start, "", 0);
		return 1;
	}
	if (!m && caller)
		l->unmapped_callers++;
	else if (!m)
		l->unmapped++;
	/* Anonymous memory in a HotSpot JVM is Java code (compiled, the interpreter or a
	 * stub) even when no code map names it: saying so is better than "[unknown]", and
	 * says what to do (the agent). Other anonymous code is another runtime's. */
	if (m && j && vp_timeline__hotspot(l->tl, pid, t) > 0) {
		out[0] = vp_profile__add_frame(l->p, VP_LAYER_JIT, vp_timeline__jvm_has_maps(l->tl, pid) ? VP_FRAME_JAVA_UNMAPPED : VP_FRAME_JAVA_NO_AGENT, "[jit]",
				   "", 0, "", 0);
		return 1;
	}
	out[0] = vp_profile__add_frame(l->p, VP_LAYER_UNKNOWN, "[unknown]", m ? "[anon]" : "", "", 0, "", 0);
	return 1;
}

/* An interpreted frame the walker identified: named by its Method* through the agent's
 * METHOD_PTR records at the sample's time, with the line of its bytecode index (also
 * left in l->jit_lines[0]: the frame keeps the line of its first sample, a location
 * needs this one's). */
/* The method id a Method* named at t (0 when unknown): with the bci, all that an
 * interpreted frame resolves through. */
static uint64_t interp_method(struct loader *l, uint32_t pid, uint64_t t, const struct vp_java_frame *jf)
{
#if HAVE_JIT_INDEX
	const struct vp_codemap *cm = vp_timeline__codemap(l->tl, pid);
	return cm ? vp_codemap__method_at(cm, jf->method, t) : 0;
#else
	(void)l, (void)pid, (void)t, (void)jf;
	return 0;
#endif
}

static uint32_t interpreted_frame(struct loader *l, uint32_t pid, uint64_t t, const struct vp_java_frame *jf)
{
	l->jit_lines[0] = 0;
#if HAVE_JIT_INDEX
	const struct vp_codemap *cm = vp_timeline__codemap(l->tl, pid);
	uint64_t id = cm ? vp_codemap__method_at(cm, jf->method, t) : 0;
	const struct vp_cm_name_info *n = id ? vp_codemap__name(cm, id) : NULL;

	if (n && n->name && n->name[0]) {
		l->jit_lines[0] = vp_codemap__line(n, jf->bci);
		return vp_profile__add_frame(l->p, VP_LAYER_INTERPRETED, n->name, "[jit]", "", 0, n->file ? n->file : "",
				 l->jit_lines[0]);
	}
#endif
	return vp_profile__add_frame(l->p, VP_LAYER_INTERPRETED, "[interpreted]", "[jit]", "", 0, "", 0);
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
static void count_flat(struct loader *l, int frame, uint8_t v)
{
	if (frame != 0 || !v)
		return;
	l->jit_leaves++;
	l->flat_wrong += v == FLAT_WRONG;
}

/* Whether a flat code map (the last method ever loaded at each address, as in a
 * perf-PID.map) names the JIT address ip other than epoch_name: code freed at a GC and
 * its address reused by a later method. Only asked on a cache miss. */
static bool flat_misnames(struct loader *l, uint32_t pid, uint64_t ip, uint64_t t, const char *epoch_name)
{
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx = vp_timeline__jit(l->tl, pid);
	struct vp_jit_frame jf[MAX_JIT_DEPTH];
	if (!idx || l->o->map_mode_flat)
		return false;
	int n = vp_jit_index__resolve(idx, ip, t, true, jf, MAX_JIT_DEPTH);
	return n > 0 && jf[0].name && strcmp(jf[0].name, epoch_name);
#else
	(void)l, (void)pid, (void)ip, (void)t, (void)epoch_name;
	return false;
#endif
}

/* The JIT method or stub that owned ip in pid at t, as vp_jit_index__owner names it,
 * and the span of times it surely did (*lo > *hi: none known); the index's answer is
 * kept in h for the frames. */
static const void *jit_owner(struct loader *l, uint32_t pid, uint64_t ip, uint64_t t, struct user_hit *h,
			     uint64_t *lo, uint64_t *hi)
{
	*lo = 1;
	*hi = 0;
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx = vp_timeline__jit(l->tl, pid);
	if (idx) {
		const void *owner = vp_jit_index__lookup(idx, ip, t, l->o->map_mode_flat, &h->jit);
		h->jit_looked = true;
		*lo = h->jit.lo;
		*hi = h->jit.hi;
		return owner;
	}
#else
	(void)l, (void)pid, (void)ip, (void)t, (void)h;
#endif
	return NULL;
}

/* The location of frames f[0..k-1] (innermost first) that the sampled address look
 * resolved to, for pprof: its mapping (vm, the one the sample's lookup found, for user
 * code; the kernel's or hypervisor's image otherwise) and the lines at this very address
 * (a frame keeps the line of the first address that named it). UINT32_MAX when none. */
static uint32_t frame_loc(struct loader *l, uint32_t pid, uint64_t look, const uint32_t *f, int k, bool user,
			  const struct vp_map *vm)
{
	uint32_t lines[MAX_JIT_DEPTH];
	if (k <= 0 || k > MAX_JIT_DEPTH)
		return UINT32_MAX;
	for (int i = 0; i < k; i++) {
		if (f[i] == UINT32_MAX)
			return UINT32_MAX;
		lines[i] = l->jit_n == k ? l->jit_lines[i] : l->p->frames[f[i]].line;
	}
	const struct vp_frame *fr = &l->p->frames[f[k - 1]];
	struct vp_mapping m = { .file = fr->image, .build_id = fr->build_id, .pid = user ? pid : 0 };
	uint32_t mid = UINT32_MAX;
	if (user)
		vp_timeline__intern_exe(l->tl, pid);
	if (user && strcmp(fr->image, "[jit]")) {
		if (vm && vm->filename[0] && strncmp(vm->filename, "[anon", 5)) {
			m.file = vm->filename;
			m.start = vm->start;
			m.limit = vm->start + vm->len;
			m.offset = vm->pgoff;
			mid = vp_profile__mapping(l->p, &m);
		}
	} else if (fr->image[0]) {
		mid = vp_profile__mapping(l->p, &m);
	}
	return vp_profile__location(l->p, mid, look, f, lines, (uint32_t)k);
}

int loader_resolve_sample(struct loader *l, const struct vp_record *r)
{
	const struct vp_sample *s = vp_record_body(r);
	const struct vp_session_opts *o = l->o;
	if (!vp_timeline__selects(l->tl, s->pid, s->tid) || !vp_timeline__in_window(l->tl, r->time))
		return 0;
	const char *kcomm, *comm = vp_timeline__thread_name(l->tl, s->pid, s->tid, r->time, &kcomm);
	if (!comm)
		comm = s->pid == 0 ? "swapper" : "";  /* the idle task has no COMM record; perf's name */
	if (!vp_timeline__comm_selected(l->tl, comm, kcomm) || !vp_timeline__container_selected(l->tl, s->pid))
		return 0;
	int ev = vp_weights__profile_event(l->w, s->event);
	if (ev < 0)
		return 0;  /* a sample of an event never described: nothing to count it as */
	/* report --vthreads: a carrier's samples while a virtual thread is mounted on it are
	 * that virtual thread's. */
	uint32_t tid = s->tid;
	char vlabel[300];
	bool moved = o->vthreads && vp_timeline__vthread_at(l->tl, s->pid, s->tid, r->time, &tid, vlabel, sizeof(vlabel));
	if (moved)
		comm = vlabel;

	uint32_t leaf_first[MAX_OUT_FRAMES], locs[MAX_OUT_FRAMES];
	int n = 0, nl = 0;
	l->jit_n = 0;
	if (other_domain(s)) {
		comm = "[other domains]";
		leaf_first[n++] = vp_profile__add_frame(l->p, VP_LAYER_HYPERVISOR,
					    s->mode == VP_MODE_GUEST_KERNEL ? "[other domain: kernel]" : "[other domain: user]",
					    "[domU]", "", 0, "", 0);
	}
	for (int i = 0; i < s->nr_kernel && n < MAX_OUT_FRAMES && !other_domain(s); i++) {
		bool hv = (i == 0 && s->mode == VP_MODE_HYPERVISOR) || vp_hvsyms__is_xen_addr(s->ips[i]);
		struct addr_ent key = { .ip = s->ips[i], .kind = hv ? AC_HYPERVISOR : AC_KERNEL, .caller = i > 0 };
		const struct addr_ent *e = ac_find(&l->ac, &key);
		if (e) {
			leaf_first[n++] = l->ac.pool[e->first];
			locs[nl++] = e->loc;
			continue;
		}
		if (hv)
			leaf_first[n++] = hypervisor_frame(l, s->ips[i]);
		else
			leaf_first[n++] = kernel_frame(l, s->ips[i], i > 0);
		locs[nl++] = frame_loc(l, s->pid, i > 0 ? s->ips[i] - 1 : s->ips[i], leaf_first + n - 1, 1, false, NULL);
		ac_put(&l->ac, &key, leaf_first + n - 1, 1, locs[nl - 1], false);
	}
	if (s->nr_user)
		l->walk[s->walk_end < VP_WALK__COUNT ? s->walk_end : VP_WALK_UNKNOWN]++;
	/* A sample inside execve: the kernel is replacing the process's image, and the user
	 * stack is still that of the program that called exec (for `viprof record -- CMD`,
	 * viprof's own launcher), whose mappings this process never recorded. One frame
	 * says so, instead of frames "in no recorded mapping" (issue 33). */
	bool in_exec = false;
	for (int i = 0; i < n && s->nr_user && !in_exec; i++) {
		const char *kn = leaf_first[i] == UINT32_MAX ? "" : l->p->frames[leaf_first[i]].name;
		in_exec = strstr(kn, "sys_execve") || !strncmp(kn, "do_execveat_common", 18) || !strcmp(kn, "bprm_execve");
	}
	if (in_exec && n < MAX_OUT_FRAMES) {
		uint32_t no_line = 0;
		leaf_first[n] = vp_profile__add_frame(l->p, VP_LAYER_NATIVE, "[the program before exec]", "[exec]", "", 0, "", 0);
		/* For pprof, a location of its own without a mapping, like a state frame's:
		 * no address of the new image is the old program's. */
		locs[nl++] = leaf_first[n] == UINT32_MAX ? UINT32_MAX
							 : vp_profile__location(l->p, UINT32_MAX, 0, leaf_first + n, &no_line, 1);
		n++;
		l->exec_stacks++;
	}
	/* Interpreted frames follow ips[]; entries that do not fit the record are ignored. */
	const struct vp_java_frame *jf = (const struct vp_java_frame *)(s->ips + s->nr_kernel + s->nr_user);
	size_t blen = vp_record_body_len(r), used = sizeof(*s) + 8 * ((size_t)s->nr_kernel + s->nr_user);
	int nj = (int)vp_sample_nr_java(s);
	if (used > blen || (blen - used) / sizeof(*jf) < (size_t)nj)
		nj = used > blen ? 0 : (int)((blen - used) / sizeof(*jf));
	int k = 0;
	for (int i = 0; i < s->nr_user && n < MAX_OUT_FRAMES && !other_domain(s) && !in_exec; i++) {
		struct vp_java_frame jcur;

		while (k < nj) {
			memcpy(&jcur, jf + k, sizeof(jcur));
			if (jcur.frame >= i)
				break;
			k++;
		}
		uint64_t ip = s->ips[s->nr_kernel + i], look = i > 0 ? ip - 1 : ip;
		if (k < nj && jcur.frame == i) {
			/* An interpreted frame resolves through the method its Method* named at
			 * this time, and its bytecode index. */
			struct addr_ent key = { .ip = look, .kind = AC_INTERP, .caller = i > 0, .pid = s->pid,
						.map = (const void *)(uintptr_t)interp_method(l, s->pid, r->time, &jcur),
						.jit = (const void *)(uintptr_t)(uint32_t)jcur.bci };
			const struct addr_ent *e = ac_find(&l->ac, &key);
			k++;
			if (e) {
				leaf_first[n++] = l->ac.pool[e->first];
				locs[nl++] = e->loc;
				continue;
			}
			leaf_first[n++] = interpreted_frame(l, s->pid, r->time, &jcur);
			l->jit_n = 1;
			locs[nl++] = frame_loc(l, s->pid, look, leaf_first + n - 1, 1, true, NULL);
			l->jit_n = 0;
			ac_put(&l->ac, &key, leaf_first + n - 1, 1, locs[nl - 1], false);
			continue;
		}
		/* Seen at a time its last answer holds for: that answer. */
		struct addr_ent skey = { .ip = ip, .kind = AC_SPAN, .caller = i > 0, .pid = s->pid };
		const struct addr_ent *e = ac_find(&l->ac, &skey);
		if (e && e->t_lo <= r->time && r->time < e->t_hi && n + e->n <= MAX_OUT_FRAMES) {
			memcpy(leaf_first + n, l->ac.pool + e->first, e->n * sizeof(*leaf_first));
			n += e->n;
			locs[nl++] = e->loc;
			count_flat(l, i, e->flat_wrong);
			continue;
		}
		/* The mapping at this time, and for code outside files the JIT method that
		 * owned the address then, are what the address resolves through. */
		struct addr_ent key = { .ip = ip, .kind = AC_USER, .caller = i > 0, .pid = s->pid };
		uint64_t lo, hi, jlo, jhi;
		struct user_hit uh = { .m = vp_timeline__map_at(l->tl, s->pid, look, r->time, &lo, &hi) };
		const struct vp_map *vm = uh.m;
		key.map = vm;
		if (!(vm && is_file_backed(vm->filename))) {
			key.jit = jit_owner(l, s->pid, ip, r->time, &uh, &jlo, &jhi);
			lo = jlo > lo ? jlo : lo;
			hi = jhi < hi ? jhi : hi;
		}
		int n0 = n;
		e = ac_find(&l->ac, &key);
		if (e && n + e->n <= MAX_OUT_FRAMES) {
			memcpy(leaf_first + n, l->ac.pool + e->first, e->n * sizeof(*leaf_first));
			n += e->n;
			locs[nl++] = e->loc;
			if (key.caller)
				l->unmapped_callers += e->unmapped;
			else
				l->unmapped += e->unmapped;
			skey.flat_wrong = e->flat_wrong;
			count_flat(l, i, e->flat_wrong);
			if (e->unmapped)
				continue;   /* counted as unmapped each time: never by span */
		} else {
			uint64_t unmapped = l->unmapped + l->unmapped_callers;
			l->jit_n = 0;
			n += user_frames(l, s->pid, r->time, ip, i > 0, &uh, leaf_first + n, MAX_OUT_FRAMES - n);
			locs[nl++] = frame_loc(l, s->pid, look, leaf_first + n0, n - n0, true, vm);
			l->jit_n = 0;
			/* What a flat map would call this leaf, when JIT code resolved it. */
			key.flat_wrong = skey.flat_wrong = i != 0 || !key.jit || n <= n0 ? 0
				: flat_misnames(l, s->pid, ip, r->time, l->p->frames[leaf_first[n0]].name) ? FLAT_WRONG : FLAT_OK;
			count_flat(l, i, key.flat_wrong);
			if (MAX_OUT_FRAMES - n0 < MAX_JIT_DEPTH)
				continue;   /* cut short by the frame limit: not an answer to keep */
			bool none = l->unmapped + l->unmapped_callers != unmapped;
			ac_put(&l->ac, &key, leaf_first + n0, n - n0, locs[nl - 1], none);
			if (none)
				continue;   /* counted as unmapped each time: never by span */
		}
		if (lo <= r->time && r->time < hi)
			span_put(&l->ac, &skey, lo, hi, leaf_first + n0, n - n0, locs[nl - 1]);
	}
	if (s->sched_state && s->sched_state < VP_SCHED__COUNT) {
		/* Off-CPU and steal sums end in a frame saying what the thread was doing.
		 * It has no address: for pprof it is a location of its own without a
		 * mapping, above the stack's own locations (a 0x0 address in the kernel's
		 * or a made-up mapping would claim code that is not there). */
		bool by_addr = nl > 0 || n == 0;
		if (n == MAX_OUT_FRAMES) {
			n--;
			by_addr = false;  /* the frames lost their root; the locations did not */
		}
		/* A Java thread's wait is named by its Java frames where they say more than
		 * the kernel (every Java sleep, park and monitor wait is a futex). */
		const char *names[MAX_OUT_FRAMES];
		char detail[64], label[128];
		for (int i = 0; i < n; i++)
			names[i] = leaf_first[i] == UINT32_MAX ? "" : l->p->frames[leaf_first[i]].name;
		int state = vp_sched_java_state(s->sched_state, names, n, detail, sizeof(detail));
		/* What Java did not name may be the JVM's own wait: a GC worker, a compiler
		 * thread or the VM thread waiting for work sleeps on a futex too, and is idle,
		 * not held by a lock (issue 33: 78% "lock" in a JVM without one contended). */
		if (state == s->sched_state && !detail[0]) {
			state = vp_sched_jvm_state(state, comm, names, n, detail, sizeof(detail));
			if (state == s->sched_state && kcomm && kcomm != comm)
				state = vp_sched_jvm_state(state, kcomm, names, n, detail, sizeof(detail));
			/* A futex wait below libjvm's own code (and above the thread's Java frames,
			 * if any) is one of HotSpot's locks or condition variables, not the
			 * application's: e.g. asking CompileBroker for a compile. */
			if (state == VP_SCHED_BLOCKED_LOCK) {
				bool jvm = false;
				for (int i = 0; i < n && !jvm; i++) {
					uint8_t ly = leaf_first[i] == UINT32_MAX ? VP_LAYER_UNKNOWN : l->p->frames[leaf_first[i]].layer;
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
			    vp_timeline__maps_file(l->tl, s->pid, r->time, "libjvm.so")) {
				bool java = false;
				for (int i = 0; i < n && !java; i++)
					java = leaf_first[i] != UINT32_MAX && (l->p->frames[leaf_first[i]].layer == VP_LAYER_JIT ||
									       l->p->frames[leaf_first[i]].layer == VP_LAYER_INTERPRETED);
				if (!java) {
					state = VP_SCHED_IDLE;
					snprintf(detail, sizeof(detail), "launcher");
				}
			}
		}
		const char *sf = vp_sched_state_frame(state);
		if (detail[0]) {
			snprintf(label, sizeof(label), "%.*s: %s]", (int)strlen(sf) - 1, sf, detail);
			sf = label;
		}
		memmove(leaf_first + 1, leaf_first, (size_t)n * sizeof(leaf_first[0]));
		leaf_first[0] = s->sched_state == VP_SCHED_STEAL
				? vp_profile__add_frame(l->p, VP_LAYER_HYPERVISOR, "[hypervisor: steal]", "[hypervisor]", "", 0, "", 0)
				: vp_profile__add_frame(l->p, VP_LAYER_KERNEL, sf, "[kernel.kallsyms]", "", 0, "", 0);
		n++;
		if (by_addr && nl < MAX_OUT_FRAMES && leaf_first[0] != UINT32_MAX) {
			uint32_t no_line = 0;
			memmove(locs + 1, locs, (size_t)nl * sizeof(locs[0]));
			locs[0] = vp_profile__location(l->p, UINT32_MAX, 0, leaf_first, &no_line, 1);
			nl++;
		} else {
			nl = 0;
		}
	}
	if (n == 0)
		leaf_first[n++] = vp_profile__add_frame(l->p, VP_LAYER_UNKNOWN, "[unknown]", "[no stack]", "", 0, "", 0);
	uint32_t root_first[MAX_OUT_FRAMES];
	for (int i = 0; i < n; i++) {
		if (leaf_first[i] == UINT32_MAX)
			return -ENOMEM;
		root_first[n - 1 - i] = leaf_first[i];
	}
	uint32_t sid;
	uint64_t nsamp, weight = vp_weights__weigh(l->w, s, r->time, &nsamp);
	int ret = vp_profile__add_stack(l->p, root_first, (uint32_t)n, s->pid, tid, comm, ev, nsamp,
					weight, &sid);
	if (!ret && moved && ev == vp_weights__time_event(l->w)) {
		struct vp_thread_times tt = { .pid = s->pid, .tid = s->tid, .vthread_ns = weight };
		ret = vp_profile__thread_times(l->p, &tt);
	}
	/* The same sample by address, for pprof; a frame without a location (no image)
	 * leaves the sample to the frame view, which pprof falls back to. */
	for (int i = 0; i < nl; i++)
		if (locs[i] == UINT32_MAX)
			nl = 0;
	if (!ret && nl && !(l->o && l->o->no_locations))
		ret = vp_profile__add_locs(l->p, sid, locs, (uint32_t)nl, ev, nsamp, weight);
	if (!ret && l->o && l->o->times)
		ret = vp_profile__add_time(l->p, sid, ev, r->time >= vp_timeline__t0(l->tl) ? r->time - vp_timeline__t0(l->tl) : 0, nsamp);
	return ret;
}
