/* What ran where and when: see postproc/session_timeline.h. The processes' mappings and
 * thread names over time live in postproc/procmaps.c; this adds the JVMs (their code maps
 * in <session>/jit/<pid>, opened the first time a pid needs them), each process's main
 * executable, threads of other pid namespaces, the vDSO and the recording's span, and
 * answers the report's filters. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/container.h"
#include "common/util.h"
#include "postproc/session_timeline.h"

struct jvm {
	uint32_t pid;
	bool tried;
	bool has_dir;
	int8_t hotspot;              /* maps libjvm.so: 1 yes, 0 no, -1 not asked yet */
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx;
	struct vp_vthreads *vt;      /* its virtual threads' mounts and waits, or NULL */
#endif
};

/* A process's main executable: the first file it mapped (after its exec), and the
 * executable mapping of that file, which pprof lists first ("File: ..."). */
struct exe {
	uint32_t pid;
	char *file;
	char bid[41];                /* the recorded build-id in hex, or "" */
	struct vp_mapping m;         /* m.file == file, m.build_id == bid; limit 0 until its text is mapped */
	bool used;                   /* interned into the profile */
};

/* A container thread's tid in its own pid namespace (VP_REC_NSTID). */
struct nstid {
	uint32_t pid, tid, nstid;
};

struct vp_timeline {
	const char *dir;
	struct vp_profile *p;
	const struct vp_session_opts *o;
	struct vp_procmaps *pm;
	struct nstid *nstids;        /* threads of processes in other pid namespaces */
	size_t nnstids, capnstids;
	struct jvm *jvms; size_t njvms, capjvms;
	struct exe *exes; size_t nexes, capexes;
	void *vdso_img;              /* the vDSO's image from the VDSO record, when the session has one */
	size_t vdso_len;
	uint64_t t0, t_last;
	bool saw_end;
	uint64_t end_duration;
};

struct vp_timeline *vp_timeline__new(const char *dir, struct vp_profile *p, const struct vp_session_opts *o)
{
	struct vp_timeline *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return NULL;
	*tl = (struct vp_timeline){ .dir = dir, .p = p, .o = o, .pm = vp_procmaps__new() };
	if (!tl->pm) {
		free(tl);
		errno = ENOMEM;
		return NULL;
	}
	return tl;
}

void vp_timeline__free(struct vp_timeline *tl)
{
	if (!tl)
		return;
	for (size_t i = 0; i < tl->nexes; i++)
		free(tl->exes[i].file);
	free(tl->exes);
	free(tl->nstids);
#if HAVE_JIT_INDEX
	for (size_t i = 0; i < tl->njvms; i++) {
		vp_jit_index__close(tl->jvms[i].idx);
		vp_vthreads__free(tl->jvms[i].vt);
	}
#endif
	free(tl->jvms);
	vp_procmaps__free(tl->pm);
	free(tl->vdso_img);
	free(tl);
}

void vp_timeline__start(struct vp_timeline *tl, uint64_t t0)
{
	tl->t0 = t0;
}

const struct vp_session_opts *vp_timeline__opts(const struct vp_timeline *tl)
{
	return tl->o;
}

uint64_t vp_timeline__t0(const struct vp_timeline *tl)
{
	return tl->t0;
}

void vp_timeline__reached(struct vp_timeline *tl, uint64_t t)
{
	if (t > tl->t_last)
		tl->t_last = t;
}

uint64_t vp_timeline__last(const struct vp_timeline *tl)
{
	return tl->t_last;
}

void vp_timeline__end(struct vp_timeline *tl, const struct vp_end *e)
{
	tl->saw_end = true;
	if (e)
		tl->end_duration = e->duration_ns;
	if (e && e->window_start) {
		/* For JFR's wall-clock times (report/report_jfr.c). */
		char v[32];
		snprintf(v, sizeof(v), "%llu", (unsigned long long)e->window_start);
		vp_profile__set_meta(tl->p, "window.start_monotonic_ns", v);
	}
}

bool vp_timeline__ended(const struct vp_timeline *tl)
{
	return tl->saw_end;
}

uint64_t vp_timeline__duration(const struct vp_timeline *tl)
{
	return tl->end_duration ? tl->end_duration : tl->t_last > tl->t0 ? tl->t_last - tl->t0 : 0;
}

/* Remembers each process's main executable as its mappings stream in: the first
 * file-backed mapping after its exec (or in its first snapshot) names the file, and
 * that file's first executable mapping is the one pprof lists first. */
static void note_exe(struct vp_timeline *tl, const struct vp_mmap *m, const char *name)
{
	struct exe *x = NULL;
	if (name[0] != '/' || !strncmp(name, "/memfd:", 7) || !strncmp(name, "/dev/", 5) || !strncmp(name, "/SYSV", 5))
		return;
	for (size_t i = 0; i < tl->nexes && !x; i++)
		if (tl->exes[i].pid == m->pid)
			x = &tl->exes[i];
	if (!x) {
		if (vp_grow((void **)&tl->exes, &tl->capexes, tl->nexes + 1, sizeof(*tl->exes)))
			return;
		x = &tl->exes[tl->nexes++];
		memset(x, 0, sizeof(*x));
		x->pid = m->pid;
		x->file = strdup(name);
		x->m.file = x->file;
		x->m.pid = m->pid;
		x->m.exe = true;
	}
	if (x->m.limit || !x->file || strcmp(x->file, name) || !(m->prot & 4 /* PROT_EXEC */))
		return;
	x->m.start = m->start;
	x->m.limit = m->start + m->len;
	x->m.offset = m->pgoff;
	if (m->build_id_size && m->build_id_size <= 20)
		vp_hex(m->build_id, m->build_id_size, x->bid);
}

int vp_timeline__mmap(struct vp_timeline *tl, uint64_t t, const struct vp_mmap *m, size_t blen)
{
	/* The filename starts at its offset, not at sizeof (the struct has tail
	 * padding before the flexible member's alignment would end it). */
	const size_t fn_off = offsetof(struct vp_mmap, filename);
	if (blen <= fn_off)
		return 0;
	char name[4096];
	size_t n = strnlen(m->filename, blen - fn_off);
	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, m->filename, n);
	name[n] = '\0';
	note_exe(tl, m, name);
	return vp_procmaps__mmap(tl->pm, t, m, name);
}

int vp_timeline__comm(struct vp_timeline *tl, uint64_t t, const struct vp_comm *c)
{
	char comm[17];
	memcpy(comm, c->comm, 16);
	comm[16] = '\0';
	if (c->exec)   /* exec drops the old image: the next file mapped is the new one */
		for (size_t i = 0; i < tl->nexes; i++)
			if (tl->exes[i].pid == c->pid)
				tl->exes[i].pid = UINT32_MAX;
	return vp_procmaps__comm(tl->pm, t, c->pid, c->tid, comm, c->exec);
}

int vp_timeline__fork(struct vp_timeline *tl, uint64_t t, const struct vp_task *task)
{
	return vp_procmaps__fork(tl->pm, t, task);
}

int vp_timeline__exit(struct vp_timeline *tl, uint64_t t, const struct vp_task *task)
{
	return vp_procmaps__exit(tl->pm, t, task);
}

void vp_timeline__nstid(struct vp_timeline *tl, const struct vp_nstid *n)
{
	if (vp_grow((void **)&tl->nstids, &tl->capnstids, tl->nnstids + 1, sizeof(*tl->nstids)))
		return;   /* without it, only that thread's full Java name is missed */
	tl->nstids[tl->nnstids++] = (struct nstid){ .pid = n->pid, .tid = n->tid, .nstid = n->nstid };
}

/* The first one: a recorder writes one, at the start. */
void vp_timeline__vdso(struct vp_timeline *tl, const void *b, size_t blen)
{
	if (!tl->vdso_img && blen >= SELFMAG && blen <= VP_VDSO_MAX && !memcmp(b, ELFMAG, SELFMAG) &&
	    (tl->vdso_img = malloc(blen))) {
		memcpy(tl->vdso_img, b, blen);
		tl->vdso_len = blen;
	}
}

const void *vp_timeline__vdso_image(const struct vp_timeline *tl, size_t *len)
{
	*len = tl->vdso_len;
	return tl->vdso_img;
}

static struct jvm *jvm_get(struct vp_timeline *tl, uint32_t pid)
{
	for (size_t i = 0; i < tl->njvms; i++)
		if (tl->jvms[i].pid == pid)
			return &tl->jvms[i];
	if (vp_grow((void **)&tl->jvms, &tl->capjvms, tl->njvms + 1, sizeof(*tl->jvms)))
		return NULL;
	struct jvm *j = &tl->jvms[tl->njvms++];
	memset(j, 0, sizeof(*j));
	j->pid = pid;
	j->hotspot = -1;
	return j;
}

/* Opens <session>/jit/<pid> the first time a pid needs it. */
static struct jvm *jvm_open(struct vp_timeline *tl, uint32_t pid)
{
	struct jvm *j = jvm_get(tl, pid);
	if (!j || j->tried)
		return j;
	j->tried = true;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s/%u", tl->dir, VP_SESSION_JIT_DIR, pid);
	struct stat st;
	j->has_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	if (!j->has_dir)
		return j;
#if HAVE_JIT_INDEX
	char err[256] = "";
	j->idx = vp_jit_index__open(path, err, sizeof(err));
	if (!j->idx && errno != ENOENT)
		vp_profile__warn(tl->p, "%s", err[0] ? err : "cannot read JIT code maps");
	const struct vp_codemap *cm = j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	if (cm && cm->damage[0])
		vp_profile__warn(tl->p, "%s", cm->damage);
	const char *walk = vp_profile__meta(tl->p, "stack_walk");
	/* Not for a recording without stacks (no -g): no stack of it is cut short. */
	const char *cc = vp_profile__meta(tl->p, "callchain");
	if (j->idx && !vp_jit_index__frame_pointers(j->idx) && !(walk && !strcmp(walk, "tables")) &&
	    !(cc && !strcmp(cc, "no")))
		vp_profile__warn(tl->p, "JVM %u ran without -XX:+PreserveFramePointer: its Java stacks are cut "
				 "short; restart it with that flag for full stacks", pid);
#else
	vp_profile__warn(tl->p, "%s has JIT code maps but this viprof was built without the JIT index "
			 "(maps/jit_index.h); Java frames are unnamed", path);
#endif
	return j;
}

bool vp_timeline__in_window(const struct vp_timeline *tl, uint64_t t)
{
	double rel = t >= tl->t0 ? (double)(t - tl->t0) / 1e9 : 0;
	return rel >= tl->o->t_from && (tl->o->t_to <= 0 || rel <= tl->o->t_to);
}

/* Whether x is in the filter v[0..n) (no filter: everything is). */
static bool in_list(const uint32_t *v, int n, uint32_t x)
{
	if (!v || n <= 0)
		return true;
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

bool vp_timeline__selects_pid(const struct vp_timeline *tl, uint32_t pid)
{
	return in_list(tl->o->pids, tl->o->npids, pid);
}

bool vp_timeline__selects_tid(const struct vp_timeline *tl, uint32_t tid)
{
	return in_list(tl->o->tids, tl->o->ntids, tid);
}

bool vp_timeline__selects(const struct vp_timeline *tl, uint32_t pid, uint32_t tid)
{
	return vp_timeline__selects_pid(tl, pid) && vp_timeline__selects_tid(tl, tid);
}

bool vp_timeline__filters_threads(const struct vp_timeline *tl)
{
	return tl->o->npids > 0 || tl->o->ntids > 0;
}

/* --container: the process's container (VP_REC_CONTAINER, read in the first pass)
 * matches; a process without a record is on the host as far as we know. */
bool vp_timeline__container_selected(const struct vp_timeline *tl, uint32_t pid)
{
	if (!tl->o->container || !*tl->o->container)
		return true;
	const struct vp_proc_container *c = vp_profile__container(tl->p, pid);
	static const struct vp_container_id host;
	return vp_container__matches(tl->o->container, c ? c->cgroup : "/", c ? &c->c : &host);
}

/* The name of thread tid of pid at t: the full Java thread name when the JVM's agent
 * recorded one (the kernel keeps 15 characters) and the kernel's name at t is its first
 * 15 bytes, as HotSpot names native threads (so a thread renamed since, or a tid the
 * agent's record does not fit, keeps the kernel's name); else the kernel's. *kernel gets
 * the kernel's (NULL when unknown), which --comm also matches. */
const char *vp_timeline__thread_name(struct vp_timeline *tl, uint32_t pid, uint32_t tid, uint64_t t,
				     const char **kernel)
{
	const char *k = vp_procmaps__comm_at(tl->pm, tid, t);
	if (!k)
		k = vp_procmaps__comm_at(tl->pm, pid, t);
	if (kernel)
		*kernel = k;
#if HAVE_JIT_INDEX
	struct jvm *j = pid ? jvm_open(tl, pid) : NULL;
	const struct vp_codemap *cm = j && j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	/* The agent of a JVM in another pid namespace names its threads by their tids
	 * there. */
	uint32_t agent_tid = tid;
	const struct vp_proc_container *pc = cm ? vp_profile__container(tl->p, pid) : NULL;
	if (pc && pc->nspid && pc->nspid != pid) {
		agent_tid = tid == pid ? pc->nspid : 0;
		for (size_t i = tl->nnstids; i-- > 0 && !agent_tid;)
			if (tl->nstids[i].pid == pid && tl->nstids[i].tid == tid)
				agent_tid = tl->nstids[i].nstid;
	}
	const char *full = cm && agent_tid ? vp_codemap__thread_name(cm, agent_tid, t) : NULL;
	if (full && (!k || (!strncmp(k, full, 15) && strlen(k) == strnlen(full, 15))))
		return full;
	/* A thread that still has its process's kernel name was never named natively (the
	 * java launcher's main thread, "java"): the agent's name for it (from its own tid)
	 * is the only one it has. */
	const char *pk = full && k && tid != pid ? vp_procmaps__comm_at(tl->pm, pid, t) : NULL;
	if (pk && !strcmp(pk, k))
		return full;
#endif
	return k;
}

/* Does --comm (o->comm) select this thread: its Java name or its kernel name? */
bool vp_timeline__comm_selected(const struct vp_timeline *tl, const char *name, const char *kernel)
{
	return !tl->o->comm || (name && !strcmp(tl->o->comm, name)) || (kernel && !strcmp(tl->o->comm, kernel));
}

const char *vp_timeline__select(struct vp_timeline *tl, uint32_t pid, uint32_t tid, uint64_t t, const char **kernel)
{
	if (!vp_timeline__selects(tl, pid, tid) || !vp_timeline__in_window(tl, t))
		return NULL;
	const char *comm = vp_timeline__thread_name(tl, pid, tid, t, kernel);
	if (!comm)
		comm = pid == 0 ? "swapper" : "";  /* the idle task has no COMM record; perf's name */
	if (!vp_timeline__comm_selected(tl, comm, *kernel) || !vp_timeline__container_selected(tl, pid))
		return NULL;
	return comm;
}

struct vp_map *vp_timeline__map_at(struct vp_timeline *tl, uint32_t pid, uint64_t addr, uint64_t t, uint64_t *lo,
				   uint64_t *hi)
{
	return vp_procmaps__find_span(tl->pm, pid, addr, t, lo, hi);
}

bool vp_timeline__maps_file(struct vp_timeline *tl, uint32_t pid, uint64_t t, const char *file)
{
	return vp_procmaps__maps_file(tl->pm, pid, t, file);
}

void vp_timeline__intern_exe(struct vp_timeline *tl, uint32_t pid)
{
	for (size_t i = 0; i < tl->nexes; i++) {
		struct exe *x = &tl->exes[i];
		if (x->pid == pid && x->m.limit && !x->used) {
			x->used = true;
			/* Pointed here, not in note_exe: tl->exes moves when it grows. */
			x->m.build_id = x->bid;
			vp_profile__mapping(tl->p, &x->m);
		}
	}
}

bool vp_timeline__jvm(struct vp_timeline *tl, uint32_t pid)
{
	return jvm_open(tl, pid) != NULL;
}

bool vp_timeline__jvm_has_maps(struct vp_timeline *tl, uint32_t pid)
{
	struct jvm *j = jvm_open(tl, pid);
	return j && j->has_dir;
}

int vp_timeline__hotspot(struct vp_timeline *tl, uint32_t pid, uint64_t t)
{
	struct jvm *j = jvm_open(tl, pid);
	if (!j)
		return -1;
	if (j->hotspot < 0)
		j->hotspot = vp_procmaps__maps_file(tl->pm, pid, t, "libjvm.so");
	return j->hotspot;
}

#if HAVE_JIT_INDEX
struct vp_jit_index *vp_timeline__jit(struct vp_timeline *tl, uint32_t pid)
{
	struct jvm *j = jvm_open(tl, pid);
	return j ? j->idx : NULL;
}

const struct vp_codemap *vp_timeline__codemap(struct vp_timeline *tl, uint32_t pid)
{
	struct vp_jit_index *idx = vp_timeline__jit(tl, pid);
	return idx ? vp_jit_index__codemap(idx) : NULL;
}

struct vp_vthreads *vp_timeline__vthreads(struct vp_timeline *tl, uint32_t pid)
{
	struct jvm *j = pid ? jvm_open(tl, pid) : NULL;
	const struct vp_codemap *cm = j && j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	if (!cm || !cm->nvthreads)
		return NULL;
	if (!j->vt)
		j->vt = vp_vthreads__build(cm);
	return j->vt;
}
#endif

/* Whether a virtual thread was mounted on carrier tid of pid at t: its report thread id
 * and name. The agent of a JVM in another pid namespace names carriers by their tids
 * there: those are not matched (docs/offcpu.md). */
bool vp_timeline__vthread_at(struct vp_timeline *tl, uint32_t pid, uint32_t tid, uint64_t t, uint32_t *vtid,
			     char *label, size_t len)
{
#if HAVE_JIT_INDEX
	uint64_t id;
	const char *name;
	if (!vp_vthreads__at(vp_timeline__vthreads(tl, pid), tid, t, &id, &name))
		return false;
	*vtid = vp_vthread_tid(id);
	vp_vthreads__label(id, name, label, len);
	return true;
#else
	(void)tl, (void)pid, (void)tid, (void)t, (void)vtid, (void)label, (void)len;
	return false;
#endif
}


bool vp_timeline__any_jit(const struct vp_timeline *tl)
{
	bool jvm = false;
#if HAVE_JIT_INDEX
	for (size_t i = 0; i < tl->njvms && !jvm; i++)
		jvm = tl->jvms[i].idx != NULL;
#else
	(void)tl;
#endif
	return jvm;
}

int vp_timeline__add_marks(const struct vp_timeline *tl)
{
#if HAVE_JIT_INDEX
	for (size_t i = 0; i < tl->njvms; i++) {
		const struct vp_codemap *cm = tl->jvms[i].idx ? vp_jit_index__codemap(tl->jvms[i].idx) : NULL;
		for (size_t e = 1; cm && e < cm->nepochs; e++) {
			char gc[64];
			int ret;
			if (cm->epochs[e].t_begin < tl->t0)
				continue;
			vp_codemap__gc_text(cm, e, gc, sizeof(gc));
			if ((ret = vp_profile__add_mark(tl->p, cm->epochs[e].t_begin - tl->t0, tl->jvms[i].pid,
							gc[0] ? gc : vp_cm_reason_name(cm->epochs[e].reason))) < 0)
				return ret;
		}
	}
#else
	(void)tl;
#endif
	return 0;
}
