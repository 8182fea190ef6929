/* The recorder's side of the stack walker: see unwinder.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <gelf.h>

#include "common/safefs.h"
#include "common/session_format.h"
#include "common/util.h"
#include "recorder/cfi.h"
#include "recorder/hotspot.h"
#include "recorder/unwinder.h"

#define NSEC 1000000000ull
#define JVM_RETRY_NS (200ull * 1000000)     /* a JVM still starting is asked again */
#define JVM_GIVE_UP_NS (60ull * NSEC)
#define DEBOUNCE_NS (2ull * 1000000)        /* mmaps at start come in bursts */

/* One ELF file's table, shared by every process that maps it. */
struct file_table {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime;
	uint32_t table;          /* in unwind_tables, or VPB_NO_TABLE */
	struct vp_cfi *cfi;      /* kept for its segment offsets */
};

/* A file mapping of a process as its last refresh found it, and the table it got: the
 * same range of the same file (device, inode, offset) in the same process is the same
 * object, so the next refresh takes its table without opening map_files again. */
struct file_map {
	uint64_t lo, hi, pgoff, ino;
	uint64_t bias;
	uint32_t dev, table;
};

struct proc {
	pid_t pid;
	uint32_t slot;
	struct file_map *memo;   /* the last refresh's file mappings, in address order */
	size_t nmemo;
	bool loaded;             /* proc_slots has it */
	int jvm;                 /* 0 unknown/not, 1 layout read, -1 gave up */
	struct vpb_hotspot hs;
	uint64_t jvm_first_try, jvm_next_try;
};

/* A JVM's code heap, as its layout was read: the walker finds the JIT's frames by
 * these ranges (reserved ends included), never through the process's mappings. */
struct code_range {
	pid_t pid;
	uint64_t lo, hi;
};

struct vp_unwinder {
	struct sampler_unwind m;
	int mode;                /* enum vp_unwind_mode */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	bool quit, busy;
	char **prewarm;          /* files to parse ahead of a launch; under lock */
	size_t nprewarm, capprewarm;
	uint32_t proc_gen;       /* the last vpb_proc.gen written */
	pid_t *dirty;            /* pids to (re)load; under lock */
	size_t ndirty, capdirty;
	uint64_t dirty_since;
	/* The code heaps of the JVMs understood so far; under lock. The heap grows by
	 * executable anonymous mappings inside them (a hundred or more in a javac run),
	 * which change nothing the walker uses: no refresh of the whole maps for those. */
	struct code_range *code;
	size_t ncode, capcode;
	/* Owned by the thread, except known[] which observe() reads under lock. */
	struct proc *procs;      /* at most m.max_procs */
	size_t nprocs;
	pid_t *known;            /* every pid ever scheduled: an open-addressing set, 0 = empty */
	size_t nknown, capknown; /* capknown is 0 or a power of two */
	uint32_t *free_slots;
	size_t nfree;
	struct file_table *files;
	size_t nfiles, capfiles;
	uint32_t vdso_table;     /* the kernel's vDSO image, the same in every process */
	struct vp_cfi *vdso_cfi;
	bool vdso_tried;
	uint32_t next_rule, next_page, next_table;
	size_t rules_mapped, pages_mapped;   /* bytes of m.rules and m.pages mapped (reach) */
	struct vpb_proc scratch;
	int cache_fd;            /* the unwind-rule cache (vp_cfi__cache_open), -1 without */
	bool cache_tried;
	struct vp_unwinder_stats st;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

/* The set of known pids (under lock): a whole-VM recording of a fork storm sees a new
 * pid per exec, and every record asks, so a linear list would not do. */
static size_t known_slot(const struct vp_unwinder *u, pid_t pid)
{
	size_t i = ((size_t)(uint32_t)pid * 0x9e3779b1u) & (u->capknown - 1);

	while (u->known[i] && u->known[i] != pid)
		i = (i + 1) & (u->capknown - 1);
	return i;
}

static bool known_has(const struct vp_unwinder *u, pid_t pid)
{
	return u->capknown && u->known[known_slot(u, pid)] == pid;
}

static void known_add(struct vp_unwinder *u, pid_t pid)
{
	if (known_has(u, pid))
		return;
	if ((u->nknown + 1) * 2 > u->capknown) {
		size_t cap = u->capknown ? u->capknown * 2 : 1024;
		pid_t *old = u->known, *n = calloc(cap, sizeof(*n));
		size_t oldcap = u->capknown;

		if (!n)
			return;
		u->known = n;
		u->capknown = cap;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i])
				u->known[known_slot(u, old[i])] = old[i];
		free(old);
	}
	u->known[known_slot(u, pid)] = pid;
	u->nknown++;
}

static bool pid_in(const pid_t *v, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

/* Under lock. */
static void schedule(struct vp_unwinder *u, pid_t pid)
{
	if (pid <= 0 || pid_in(u->dirty, u->ndirty, pid))
		return;
	if (vp_grow((void **)&u->dirty, &u->capdirty, u->ndirty + 1, sizeof(pid_t)))
		return;
	if (!u->ndirty)
		u->dirty_since = mono_ns();
	u->dirty[u->ndirty++] = pid;
	known_add(u, pid);
	pthread_cond_signal(&u->wake);
}

void vp_unwinder__add_pid(struct vp_unwinder *u, pid_t pid)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	schedule(u, pid);
	pthread_mutex_unlock(&u->lock);
}

/* Under lock: is [lo, hi) of process pid inside one of its code heaps? */
static bool in_code_heap(const struct vp_unwinder *u, pid_t pid, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < u->ncode; i++)
		if (u->code[i].pid == pid && lo >= u->code[i].lo && hi <= u->code[i].hi && lo < hi)
			return true;
	return false;
}

/* Takes the lock: replaces pid's code heaps with those of hs (none when hs is NULL). */
static void code_ranges_set(struct vp_unwinder *u, pid_t pid, const struct vpb_hotspot *hs)
{
	pthread_mutex_lock(&u->lock);
	for (size_t i = 0; i < u->ncode;)
		if (u->code[i].pid == pid)
			u->code[i] = u->code[--u->ncode];
		else
			i++;
	for (uint32_t k = 0; hs && k < hs->nr_heaps && k < VPB_MAX_HEAPS; k++) {
		if (vp_grow((void **)&u->code, &u->capcode, u->ncode + 1, sizeof(*u->code)))
			break;   /* without it the process is refreshed at each such mmap, as before */
		u->code[u->ncode++] = (struct code_range){ .pid = pid, .lo = hs->heaps[k].lo, .hi = hs->heaps[k].hi };
	}
	pthread_mutex_unlock(&u->lock);
}

void vp_unwinder__observe(struct vp_unwinder *u, uint32_t type, const void *body, size_t len)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	bool known;
	switch (type) {
	case VP_REC_SAMPLE:
		if (len >= sizeof(struct vp_sample)) {
			const struct vp_sample *s = body;

			if (s->walk_end == VP_WALK_NO_PROC && s->pid &&
			    !known_has(u, (pid_t)s->pid))
				schedule(u, (pid_t)s->pid);
		}
		break;
	case VP_REC_MMAP:
		if (len >= sizeof(struct vp_mmap)) {
			const struct vp_mmap *m = body;

			if ((m->prot & PROT_EXEC) && known_has(u, (pid_t)m->pid) &&
			    !(m->ino == 0 && in_code_heap(u, (pid_t)m->pid, m->start, m->start + m->len))) {
				schedule(u, (pid_t)m->pid);
			} else if (m->prot & PROT_EXEC) {
				u->st.mmaps_skipped++;
			}
		}
		break;
	case VP_REC_COMM:
		if (len >= sizeof(struct vp_comm)) {
			const struct vp_comm *c = body;

			/* A new program: its tables are needed at once, before it is gone (a
			 * short-lived process under -a would otherwise never get them); not
			 * when only what is sampled gets them. */
			if (c->exec && u->mode != VP_UNWIND_SAMPLED)
				schedule(u, (pid_t)c->pid);
		}
		break;
	case VP_REC_FORK:
		if (len >= sizeof(struct vp_task)) {
			const struct vp_task *t = body;

			known = known_has(u, (pid_t)t->ppid);
			if (t->pid != t->ppid && known && u->mode != VP_UNWIND_SAMPLED)
				schedule(u, (pid_t)t->pid);
		}
		break;
	case VP_REC_EXIT:
		if (len >= sizeof(struct vp_task)) {
			const struct vp_task *t = body;

			/* The process is gone: refresh finds no mappings and frees its slot. */
			if (t->pid == t->tid && known_has(u, (pid_t)t->pid))
				schedule(u, (pid_t)t->pid);
		}
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&u->lock);
}

/* ---- tables */

/* The shared arrays are mapped as the tables grow, MAP_STEP bytes at a time, into the
 * span the sampler reserved for each (sampler.h). Mapped whole at start, the walker's
 * 34 MB put 8,700 pages into viprof's page table at every start (4 ms of CPU, and 1 ms
 * more to take them out at the end), where the tables of one program (javac: 272,000
 * rules, 2 MB) use a few. */
#define MAP_STEP (1u << 20)

static int reach(void *base, int fd, size_t *mapped, size_t need, size_t max)
{
	size_t to = (need + MAP_STEP - 1) & ~(size_t)(MAP_STEP - 1);

	if (need <= *mapped)
		return 0;
	max = (max + 4095) & ~(size_t)4095;
	if (to > max)
		to = max;
	if (mmap((char *)base + *mapped, to - *mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
		 (off_t)*mapped) == MAP_FAILED)
		return -errno;
	*mapped = to;
	return 0;
}

/* Copies a file's rules into the shared arrays and builds its page index. */
static uint32_t upload(struct vp_unwinder *u, const struct vp_cfi *cfi)
{
	size_t n = 0;
	const struct vpb_rule *r = vp_cfi__rules(cfi, &n);
	struct vpb_rule *rules = u->m.rules;
	bool lead = n == 0 || r[0].pc != 0;     /* the table must start at pc 0 */
	size_t total = n + lead;
	uint32_t last = n ? r[n - 1].pc : 0;
	size_t npages = ((size_t)last >> VPB_PAGE_SHIFT) + 1;
	uint32_t t = u->next_table;

	if (t >= u->m.max_tables || u->next_rule + total > u->m.max_rules ||
	    u->next_page + npages + 1 > u->m.max_pages) {
		u->st.table_full++;
		return VPB_NO_TABLE;
	}
	if (reach(u->m.rules, u->m.rules_fd, &u->rules_mapped, (u->next_rule + total) * sizeof(struct vpb_rule),
		  (size_t)u->m.max_rules * sizeof(struct vpb_rule)) ||
	    reach(u->m.pages, u->m.pages_fd, &u->pages_mapped, (u->next_page + npages + 1) * sizeof(uint64_t),
		  (size_t)u->m.max_pages * sizeof(uint64_t))) {
		u->st.table_full++;     /* not mapped: as good as full */
		return VPB_NO_TABLE;
	}
	struct vpb_rule *dst = rules + u->next_rule;
	if (lead)
		dst[0] = (struct vpb_rule){ .pc = 0, .kind = VPB_RULE_NONE, .fp_off = VPB_FP_SAME };
	memcpy(dst + lead, r, n * sizeof(*r));
	/* pages[p] = the rule in force at the first byte of page p. */
	uint64_t *pages = u->m.pages + u->next_page;
	size_t i = 0;
	for (size_t p = 0; p <= npages; p++) {
		uint64_t at = (uint64_t)p << VPB_PAGE_SHIFT;

		while (i + 1 < total && dst[i + 1].pc <= at)
			i++;
		pages[p] = i;
	}
	struct vpb_table tab = { .rule_first = u->next_rule, .nr_rules = (uint32_t)total,
				 .page_first = u->next_page, .nr_pages = (uint32_t)npages };
	if (bpf_map_update_elem(u->m.tables_fd, &t, &tab, BPF_ANY))
		return VPB_NO_TABLE;
	u->next_rule += (uint32_t)total;
	u->next_page += (uint32_t)npages + 1;
	u->next_table++;
	u->st.rules += total;
	return t;
}

static struct file_table *file_for(struct vp_unwinder *u, int fd)
{
	struct stat st;
	char err[256];

	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return NULL;
	int64_t mt = (int64_t)st.st_mtim.tv_sec * (int64_t)NSEC + st.st_mtim.tv_nsec;
	for (size_t i = 0; i < u->nfiles; i++) {
		struct file_table *f = &u->files[i];

		if (f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size && f->mtime == mt)
			return f;
	}
	if (vp_grow((void **)&u->files, &u->capfiles, u->nfiles + 1, sizeof(*u->files)))
		return NULL;
	struct file_table *f = &u->files[u->nfiles++];
	uint64_t t0 = mono_ns();
	*f = (struct file_table){ .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtime = mt,
				  .table = VPB_NO_TABLE };
	/* Opened by the worker thread, on first use, not before the first sample. */
	if (!u->cache_tried) {
		u->cache_tried = true;
		u->cache_fd = vp_cfi__cache_open();
	}
	struct vp_cfi_key key = { (uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size, (uint64_t)mt };
	if (u->cache_fd >= 0 && (f->cfi = vp_cfi__cache_load(u->cache_fd, &key))) {
		u->st.cached++;
	} else {
		f->cfi = vp_cfi__build(fd, err, sizeof(err));
		if (f->cfi && u->cache_fd >= 0 && vp_cfi__cache_store(u->cache_fd, &key, f->cfi) == 0)
			u->st.stored++;
	}
	if (f->cfi && vp_cfi__refused(f->cfi)) {
		/* A crafted or damaged file: its frames get no rules, and the recording says so. */
		u->st.cfi_refused++;
		snprintf(u->st.cfi_error, sizeof(u->st.cfi_error), "%s", vp_cfi__refused(f->cfi));
	}
	if (f->cfi)
		f->table = upload(u, f->cfi);
	u->st.parse_ns += mono_ns() - t0;
	u->st.files++;
	return f;
}

/* The vDSO is not a file: build its table from our own copy of the image. */
static void load_vdso(struct vp_unwinder *u)
{
	unsigned long base = getauxval(AT_SYSINFO_EHDR);
	char err[256];

	u->vdso_tried = true;
	u->vdso_table = VPB_NO_TABLE;
	if (!base)
		return;
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long lo, hi, size = 0;
	char line[512];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo == base)
			size = hi - lo;
	if (f)
		fclose(f);
	int fd = size ? memfd_create("vdso", MFD_CLOEXEC) : -1;
	if (fd < 0)
		return;
	if (write(fd, (const void *)base, size) == (ssize_t)size) {
		u->vdso_cfi = vp_cfi__build(fd, err, sizeof(err));
		if (u->vdso_cfi)
			u->vdso_table = upload(u, u->vdso_cfi);
	}
	close(fd);
}

/* ---- processes */

static struct proc *proc_get(struct vp_unwinder *u, pid_t pid, bool create)
{
	for (size_t i = 0; i < u->nprocs; i++)
		if (u->procs[i].pid == pid)
			return &u->procs[i];
	if (!create || !u->nfree)
		return NULL;
	struct proc *p = &u->procs[u->nprocs++];
	*p = (struct proc){ .pid = pid, .slot = u->free_slots[--u->nfree] };
	u->st.procs++;
	return p;
}

static void proc_drop(struct vp_unwinder *u, struct proc *p)
{
	uint32_t key = (uint32_t)p->pid;

	if (p->loaded)
		bpf_map_delete_elem(u->m.proc_slots_fd, &key);
	if (p->jvm == 1)
		code_ranges_set(u, p->pid, NULL);
	u->free_slots[u->nfree++] = p->slot;
	free(p->memo);
	*p = u->procs[--u->nprocs];
}

/* The memo entry for a file mapping, scanning on from *cursor (both lists are in
 * address order). */
static const struct file_map *memo_find(const struct proc *p, size_t *cursor, const struct file_map *k)
{
	for (size_t i = *cursor; i < p->nmemo; i++) {
		const struct file_map *m = &p->memo[i];
		if (m->lo > k->lo)
			break;
		if (m->lo == k->lo) {
			*cursor = i + 1;
			return m->hi == k->hi && m->pgoff == k->pgoff && m->ino == k->ino && m->dev == k->dev ? m : NULL;
		}
	}
	return NULL;
}

static int cmp_mapping(const void *a, const void *b)
{
	const struct vpb_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Reads one line of /proc/PID/maps into a mapping: only executable ones are kept. */
struct memo_pass {
	const struct proc *p;    /* the old memo */
	size_t cursor;
	struct file_map *next;   /* the new one, VPB_MAX_MAPS entries */
	size_t nnext;
};

static bool map_line(struct vp_unwinder *u, pid_t pid, const char *line, struct vpb_mapping *out,
		     bool *jvm, struct memo_pass *mp)
{
	unsigned long lo, hi, pgoff, ino;
	char perms[8], path[4096] = "";
	unsigned maj, min;

	/* Most lines are data: the permissions ("r-xp") decide before the whole line is
	 * parsed (sscanf of every line was a tenth of the service's CPU on a busy VM). */
	const char *sp = strchr(line, ' ');
	if (!sp || !sp[1] || !sp[2] || sp[3] != 'x')
		return false;
	if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %4095[^\n]", &lo, &hi, perms, &pgoff, &maj, &min,
		   &ino, path) < 7 || perms[2] != 'x')
		return false;
	char *p = path;
	while (*p == ' ')
		p++;
	*out = (struct vpb_mapping){ .start = lo, .end = hi, .table = VPB_NO_TABLE, .kind = VPB_MAP_NATIVE };
	if (!strcmp(p, "[vdso]")) {
		if (!u->vdso_tried)
			load_vdso(u);
		if (u->vdso_cfi && u->vdso_table != VPB_NO_TABLE) {
			uint64_t v;

			if (!vp_cfi__vaddr_of_offset(u->vdso_cfi, pgoff, &v)) {
				out->table = u->vdso_table;
				out->bias = lo - v + vp_cfi__base(u->vdso_cfi);
			}
		}
		return true;
	}
	if (ino == 0 || p[0] != '/') {
		out->kind = VPB_MAP_ANON;
		return true;
	}
	size_t pl = strlen(p);
	if (pl >= 10 && !strcmp(p + pl - 10, "/libjvm.so"))
		*jvm = true;
	struct file_map key = { .lo = lo, .hi = hi, .pgoff = pgoff, .ino = ino, .dev = (maj << 20) | min,
				.table = VPB_NO_TABLE };
	const struct file_map *old = mp ? memo_find(mp->p, &mp->cursor, &key) : NULL;
	if (old) {
		out->table = old->table;
		out->bias = old->bias;
		mp->next[mp->nnext++] = *old;
		return true;
	}
	/* map_files names the mapped object itself, whatever its path became; opened
	 * without blocking and checked to be a regular file (file_for). */
	char mf[96];
	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%lx-%lx", (int)pid, lo, hi);
	int fd = vp_safe_open_regular(mf, false);   /* a mapped device is never opened */
	if (fd < 0)
		return true;
	struct file_table *f = file_for(u, fd);
	close(fd);
	uint64_t v;
	if (f && f->cfi && f->table != VPB_NO_TABLE && !vp_cfi__vaddr_of_offset(f->cfi, pgoff, &v)) {
		out->table = f->table;
		out->bias = lo - v + vp_cfi__base(f->cfi);
	}
	if (f && mp) {   /* a file that was read (its table or that it has none) */
		key.table = out->table;
		key.bias = out->bias;
		mp->next[mp->nnext++] = key;
	}
	return true;
}

static void refresh(struct vp_unwinder *u, pid_t pid)
{
	char path[64], line[4200];
	bool jvm = false;

	u->st.refreshes++;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	struct proc *p = proc_get(u, pid, f != NULL);
	if (!f) {
		if (p)
			proc_drop(u, p);
		return;
	}
	if (!p) {
		fclose(f);
		return;
	}
	struct vpb_proc *vp = &u->scratch;
	memset(vp, 0, sizeof(*vp));
	struct memo_pass mp = { .p = p, .next = malloc(VPB_MAX_MAPS * sizeof(struct file_map)) };
	while (fgets(line, sizeof(line), f)) {
		if (vp->nr_maps >= VPB_MAX_MAPS)
			break;
		if (map_line(u, pid, line, &vp->maps[vp->nr_maps], &jvm, mp.next ? &mp : NULL))
			vp->nr_maps++;
	}
	fclose(f);
	if (mp.next) {
		struct file_map *fit = realloc(mp.next, (mp.nnext ? mp.nnext : 1) * sizeof(*fit));
		free(p->memo);
		p->memo = fit ? fit : mp.next;
		p->nmemo = mp.nnext;
	}
	if (vp->nr_maps == 0) {
		/* Gone, or a zombie: its slot goes back. */
		proc_drop(u, p);
		return;
	}
	vp_sort(vp->maps, vp->nr_maps, sizeof(vp->maps[0]), cmp_mapping);
	if (jvm && p->jvm == 0) {
		char err[160];
		uint64_t now = mono_ns();
		int rc = vp_hotspot__read_pid(pid, &p->hs, err, sizeof(err));

		if (!p->jvm_first_try)
			p->jvm_first_try = now;
		if (rc == 0) {
			p->jvm = 1;
			u->st.jvms++;
			code_ranges_set(u, pid, &p->hs);
		} else if (now - p->jvm_first_try < JVM_GIVE_UP_NS) {
			/* A JVM still starting can be caught half-initialised whatever the
			 * error: ask again until it has had time to finish. */
			p->jvm_next_try = now + JVM_RETRY_NS;
		} else {
			p->jvm = -1;
			u->st.jvm_failed++;
			snprintf(u->st.jvm_error, sizeof(u->st.jvm_error), "%s", err);
			memset(&p->hs, 0, sizeof(p->hs));
		}
	}
	if (p->jvm == 1)
		vp->hs = p->hs;
	/* A new generation per write: the switch tracer reuses a thread's last walk only
	 * while its process's entry (maps, tables, code heaps) is the one it was made with. */
	/* Written twice, each time with a new gen: the kernel copies an array entry while
	 * walks on other CPUs read it, and the sampler's rule cache (walker.bpf.h,
	 * WALK_RCACHE) keeps what a walk found under the gen it read before the mappings. A
	 * walk that read a gen and then half-new mappings caches under a gen that the second
	 * write retires; one that reads the second write's gen reads it during the second
	 * copy, when the mappings are already all new. */
	uint32_t key = (uint32_t)pid;
	int e = 0;
	for (int pass = 0; pass < 2 && !e; pass++) {
		if (++u->proc_gen == 0)
			u->proc_gen = 1;
		vp->gen = u->proc_gen;
		e = bpf_map_update_elem(u->m.procs_fd, &p->slot, vp, BPF_ANY);
	}
	if (!e && bpf_map_update_elem(u->m.proc_slots_fd, &key, &p->slot, BPF_ANY) == 0)
		p->loaded = true;
}

/* Under lock. */
static void prewarm_add(struct vp_unwinder *u, const char *path)
{
	char *c;

	if (vp_grow((void **)&u->prewarm, &u->capprewarm, u->nprewarm + 1, sizeof(char *)) || !(c = strdup(path)))
		return;
	u->prewarm[u->nprewarm++] = c;
	pthread_cond_signal(&u->wake);
}

/* The shared objects a file names in DT_NEEDED, found where the dynamic linker would
 * usually find them (its RUNPATH with $ORIGIN, then the system directories). */
static void needed_libs(struct vp_unwinder *u, int fd, const char *path)
{
	static const char *const sysdirs[] = { "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64",
					       "/usr/lib64", "/lib", "/usr/lib" };
	char origin[4096], runpath[4096] = "";
	const char *slash = strrchr(path, '/');

	snprintf(origin, sizeof(origin), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return;
	Elf_Scn *scn = NULL;
	const char *names[64];
	int n = 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *v;

			if (!gelf_getdyn(d, (int)i, &dyn) || !(v = elf_strptr(e, sh.sh_link, dyn.d_un.d_val)))
				continue;
			if (dyn.d_tag == DT_NEEDED && n < 64)
				names[n++] = v;
			else if (dyn.d_tag == DT_RUNPATH || dyn.d_tag == DT_RPATH)
				snprintf(runpath, sizeof(runpath), "%s", v);
		}
	}
	for (int i = 0; i < n; i++) {
		char cand[8192];
		bool found = false;
		char rp[4096];

		snprintf(rp, sizeof(rp), "%s", runpath);
		for (char *save = NULL, *dir = strtok_r(rp, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
			if (!strncmp(dir, "$ORIGIN", 7))
				snprintf(cand, sizeof(cand), "%s%s/%s", origin, dir + 7, names[i]);
			else
				snprintf(cand, sizeof(cand), "%s/%s", dir, names[i]);
			found = access(cand, R_OK) == 0;
		}
		for (size_t k = 0; k < sizeof(sysdirs) / sizeof(sysdirs[0]) && !found; k++) {
			snprintf(cand, sizeof(cand), "%s/%s", sysdirs[k], names[i]);
			found = access(cand, R_OK) == 0;
		}
		if (found) {
			pthread_mutex_lock(&u->lock);
			prewarm_add(u, cand);
			pthread_mutex_unlock(&u->lock);
		}
	}
	elf_end(e);
}

/* Builds the table of a file a launched command will map, before it runs. */
static void prewarm_file(struct vp_unwinder *u, const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		size_t before = u->nfiles;
		struct file_table *f = file_for(u, fd);

		/* Only a file seen for the first time has its dependencies followed. */
		if (f && u->nfiles > before)
			needed_libs(u, fd, path);
	}
	close(fd);
}

void vp_unwinder__prewarm(struct vp_unwinder *u, const char *cmd)
{
	char path[4096] = "", real[4096];

	if (!u || !cmd)
		return;
	if (strchr(cmd, '/')) {
		snprintf(path, sizeof(path), "%s", cmd);
	} else {
		const char *env = getenv("PATH");
		char pv[8192];

		snprintf(pv, sizeof(pv), "%s", env ? env : "/usr/bin:/bin");
		for (char *save = NULL, *d = strtok_r(pv, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
			snprintf(path, sizeof(path), "%s/%s", d, cmd);
			if (access(path, X_OK) == 0)
				break;
			path[0] = '\0';
		}
	}
	if (!path[0] || !realpath(path, real))
		return;
	pthread_mutex_lock(&u->lock);
	prewarm_add(u, real);
	/* A JDK launcher loads libjvm.so with dlopen, which DT_NEEDED does not show. */
	size_t n = strlen(real);
	if (n > 9 && !strcmp(real + n - 9, "/bin/java")) {
		char jvm[4200];

		snprintf(jvm, sizeof(jvm), "%.*s/lib/server/libjvm.so", (int)(n - 9), real);
		if (access(jvm, R_OK) == 0)
			prewarm_add(u, jvm);
	}
	pthread_mutex_unlock(&u->lock);
}

static void *worker(void *arg)
{
	struct vp_unwinder *u = arg;

	pthread_mutex_lock(&u->lock);
	while (!u->quit) {
		uint64_t now = mono_ns();

		/* JVMs still starting are asked again on a timer; the next one's time. */
		uint64_t next_try = 0;
		for (size_t i = 0; i < u->nprocs; i++) {
			if (u->procs[i].jvm != 0 || !u->procs[i].jvm_next_try)
				continue;
			if (now >= u->procs[i].jvm_next_try) {
				u->procs[i].jvm_next_try = 0;
				schedule(u, u->procs[i].pid);
			} else if (!next_try || u->procs[i].jvm_next_try < next_try) {
				next_try = u->procs[i].jvm_next_try;
			}
		}
		if (u->nprewarm) {
			char *path = u->prewarm[--u->nprewarm];

			u->busy = true;
			pthread_mutex_unlock(&u->lock);
			prewarm_file(u, path);
			free(path);
			pthread_mutex_lock(&u->lock);
			u->busy = false;
			continue;
		}
		if (!u->ndirty || now - u->dirty_since < DEBOUNCE_NS) {
			struct timespec ts;

			if (!u->ndirty)
				pthread_cond_broadcast(&u->idle);
			/* Idle, the worker sleeps until it is given work or a JVM's retry is
			 * due: no timer ticks while nothing happens (the service runs for days). */
			if (!u->ndirty && !next_try) {
				pthread_cond_wait(&u->wake, &u->lock);
				continue;
			}
			uint64_t wait = u->ndirty ? DEBOUNCE_NS : next_try - now;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)(wait / NSEC);
			ts.tv_nsec += (long)(wait % NSEC);
			if (ts.tv_nsec >= (long)NSEC) {
				ts.tv_sec++;
				ts.tv_nsec -= (long)NSEC;
			}
			pthread_cond_timedwait(&u->wake, &u->lock, &ts);
			continue;
		}
		size_t n = u->ndirty;
		pid_t *batch = malloc(n * sizeof(pid_t));
		if (!batch) {
			u->ndirty = 0;
			continue;
		}
		memcpy(batch, u->dirty, n * sizeof(pid_t));
		u->ndirty = 0;
		u->busy = true;
		pthread_mutex_unlock(&u->lock);
		for (size_t i = 0; i < n; i++)
			refresh(u, batch[i]);
		free(batch);
		pthread_mutex_lock(&u->lock);
		u->busy = false;
		if (!u->ndirty)
			pthread_cond_broadcast(&u->idle);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

void vp_unwinder__settle(struct vp_unwinder *u, int timeout_ms)
{
	if (!u)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= (long)NSEC) {
		ts.tv_sec++;
		ts.tv_nsec -= (long)NSEC;
	}
	pthread_mutex_lock(&u->lock);
	while ((u->ndirty || u->nprewarm || u->busy) && !u->quit)
		if (pthread_cond_timedwait(&u->idle, &u->lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&u->lock);
}

void vp_unwinder__stats(struct vp_unwinder *u, struct vp_unwinder_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	*out = u->st;
	pthread_mutex_unlock(&u->lock);
}

struct vp_unwinder *vp_unwinder__new(const struct sampler_unwind *maps, int mode)
{
	struct vp_unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->m = *maps;
	u->mode = mode;
	u->cache_fd = -1;
	u->procs = calloc(maps->max_procs, sizeof(*u->procs));
	u->free_slots = calloc(maps->max_procs, sizeof(*u->free_slots));
	if (!u->procs || !u->free_slots) {
		vp_unwinder__free(u);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < maps->max_procs; i++)
		u->free_slots[u->nfree++] = maps->max_procs - 1 - i;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->wake, NULL);
	pthread_cond_init(&u->idle, NULL);
	int rc = pthread_create(&u->thread, NULL, worker, u);
	if (rc) {
		vp_unwinder__free(u);
		errno = rc;
		return NULL;
	}
	u->thread_started = true;
	return u;
}

void vp_unwinder__free(struct vp_unwinder *u)
{
	if (!u)
		return;
	if (u->thread_started) {
		pthread_mutex_lock(&u->lock);
		u->quit = true;
		pthread_cond_broadcast(&u->wake);
		pthread_mutex_unlock(&u->lock);
		pthread_join(u->thread, NULL);
		pthread_mutex_destroy(&u->lock);
		pthread_cond_destroy(&u->wake);
		pthread_cond_destroy(&u->idle);
	}
	for (size_t i = 0; i < u->nfiles; i++)
		vp_cfi__free(u->files[i].cfi);
	vp_cfi__free(u->vdso_cfi);
	if (u->cache_fd >= 0)
		close(u->cache_fd);
	free(u->files);
	for (size_t i = 0; u->procs && i < u->nprocs; i++)
		free(u->procs[i].memo);
	free(u->procs);
	free(u->free_slots);
	free(u->dirty);
	free(u->known);
	free(u->code);
	for (size_t i = 0; i < u->nprewarm; i++)
		free(u->prewarm[i]);
	free(u->prewarm);
	free(u);
}

static int unwind_emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct vp_unwind_sink *us = ctx;

	if (us->u)
		vp_unwinder__observe(us->u, type, body, len);
	return us->next.emit(us->next.ctx, type, time, body, len);
}

struct vp_sink vp_unwind_sink(struct vp_unwind_sink *us)
{
	return (struct vp_sink){ .emit = unwind_emit, .ctx = us };
}
