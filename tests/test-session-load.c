/* Loading a synthetic session written with the chunkfile writer: META, EVENT, MMAPs of
 * ELF fixtures, KSYMs, FORK/COMM/EXIT, LOST, SAMPLEs with known stacks. Checks the
 * folded output exactly (stacks, names, layers, merges across pids), pid reuse, a
 * library mapped late, fork copying mappings, a synthesized mapping stamped after the
 * first samples, callers looked up at ip-1, image+offset names, a build-id mismatch,
 * the filters, a torn tail (incomplete), a corrupt chunk and a missing directory; and
 * that the samples kept by the first pass for the second do not change the profile. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "maps/codemap_format.h"
#include "postproc/elfsym.h"
#include "report/report.h"
#include "postproc/session.h"
#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

#define FX(name) FIXTURE_DIR "/" name
#define MS 1000000ull

static uint64_t base;   /* record times: base + offset; base is after the file's creation */

/* The executable PT_LOAD of path, read from the program headers: the mapping the
 * kernel would make of it. */
struct seg { uint64_t vaddr, off, filesz; uint16_t type; };
static struct seg text_seg(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		FAIL("cannot open %s", path);
	Elf64_Ehdr eh;
	ASSERT_EQ(pread(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		ASSERT_EQ(pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)), (ssize_t)sizeof(ph));
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			close(fd);
			return (struct seg){ ph.p_vaddr, ph.p_offset, ph.p_filesz, eh.e_type };
		}
	}
	FAIL("no executable segment in %s", path);
}

/* A mapping of the text segment of path whose file starts (virtually) at load bias. */
struct map { const char *path; uint64_t bias, start, len, pgoff; };
static struct map mk_map(const char *path, uint64_t bias)
{
	struct seg s = text_seg(path);
	struct map m = { path, s.type == ET_EXEC ? 0 : bias, 0, 0, s.off & ~0xfffull };
	m.start = m.bias + (s.vaddr & ~0xfffull);
	m.len = ((s.vaddr + s.filesz + 0xfff) & ~0xfffull) - (s.vaddr & ~0xfffull);
	return m;
}

static void w_mmap(struct cfile_writer *w, uint64_t t, uint32_t pid, const struct map *m, const uint8_t *bid,
		   bool synth)
{
	char buf[sizeof(struct vp_mmap) + 512] = { 0 };
	struct vp_mmap *r = (void *)buf;
	r->pid = r->tid = pid;
	r->start = m->start;
	r->len = m->len;
	r->pgoff = m->pgoff;
	r->prot = 5;
	r->synthesized = synth;
	if (bid) {
		memcpy(r->build_id, bid, 20);
		r->build_id_size = 20;
	}
	strcpy(r->filename, m->path);
	ASSERT_OK(cfile_writer__append(w, VP_REC_MMAP, base + t, buf, sizeof(*r) + strlen(m->path) + 1));
}

static void w_comm(struct cfile_writer *w, uint64_t t, uint32_t pid, uint32_t tid, const char *c, bool exec)
{
	struct vp_comm r = { .pid = pid, .tid = tid, .exec = exec };
	strncpy(r.comm, c, sizeof(r.comm) - 1);
	ASSERT_OK(cfile_writer__append(w, VP_REC_COMM, base + t, &r, sizeof(r)));
}

static void w_task(struct cfile_writer *w, uint32_t type, uint64_t t, uint32_t pid, uint32_t ppid)
{
	struct vp_task r = { pid, ppid, pid, ppid };
	ASSERT_OK(cfile_writer__append(w, type, base + t, &r, sizeof(r)));
}

static void w_ksym(struct cfile_writer *w, uint64_t addr, uint64_t size, const char *name)
{
	char buf[sizeof(struct vp_ksym) + 64] = { 0 };
	struct vp_ksym *k = (void *)buf;
	k->addr = addr;
	k->size = size;
	strcpy(k->name, name);
	ASSERT_OK(cfile_writer__append(w, VP_REC_KSYM, 0, buf, sizeof(*k) + strlen(name) + 1));
}

/* ips: nk kernel frames then user frames, each leaf first. */
static void w_sample(struct cfile_writer *w, uint64_t t, uint32_t pid, uint32_t tid, int nk, int nu,
		     const uint64_t *ips, int times)
{
	char buf[sizeof(struct vp_sample) + 8 * 32] = { 0 };
	struct vp_sample *s = (void *)buf;
	s->pid = pid;
	s->tid = tid;
	s->mode = pid == 600 ? VP_MODE_HYPERVISOR : nk ? VP_MODE_KERNEL : VP_MODE_USER;
	s->period = 1000000;
	s->nr_kernel = (uint16_t)nk;
	s->nr_user = (uint16_t)nu;
	memcpy(s->ips, ips, 8 * (size_t)(nk + nu));
	for (int i = 0; i < times; i++)
		ASSERT_OK(cfile_writer__append(w, VP_REC_SAMPLE, base + t, buf, sizeof(*s) + 8 * (size_t)(nk + nu)));
}

#define K_SCHED 0xffffffff81002000ull
#define K_SYSCALL 0xffffffff81001000ull
#define P_BIAS 0x555555554000ull
#define L_BIAS 0x7f0000000000ull
#define JIT_ADDR 0x7e0000001000ull

static struct map pie, lib, lib2, cxx, nosyms;
static uint64_t a_alpha, a_beta, a_main, a_lib_one, a_lib_two, hv_ip;

/* Runtime address of vaddr v in a mapping of m's file. */
static uint64_t rt(const struct map *m, uint64_t v) { return m->bias + v; }

static void write_session(const char *dir, bool end, size_t chunk)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, chunk, false);
	ASSERT_NOT_NULL(w);
	static const char meta[] = "backend\0bpf\0hypervisor\0KVM\0";
	ASSERT_OK(cfile_writer__append(w, VP_REC_META, base, meta, sizeof(meta)));
	struct vp_event_desc ev = { .index = 0, .perf_type = 1, .freq = 1000,
				    .flags = VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS };
	strcpy(ev.name, "cpu-clock");
	ASSERT_OK(cfile_writer__append(w, VP_REC_EVENT, base, &ev, sizeof(ev)));
	w_comm(w, 0, 100, 100, "app", false);
	w_mmap(w, 0, 100, &pie, NULL, true);

	/* pid 100, first life: a plain user stack x3 ... */
	uint64_t s1[] = { rt(&pie, a_alpha) + 5, rt(&pie, a_beta) + 10, rt(&pie, a_main) + 8 };
	w_sample(w, 1 * MS, 100, 100, 0, 3, s1, 3);
	/* ... kernel + user x2 (kernel symbols arrive after the sample, as the recorder may) */
	uint64_t s2[] = { K_SCHED + 0x10, K_SYSCALL + 0x20, rt(&pie, a_beta) + 5, rt(&pie, a_main) + 8 };
	w_sample(w, 1 * MS, 100, 100, 2, 2, s2, 2);
	w_ksym(w, K_SCHED, 0x100, "schedule");
	w_ksym(w, K_SYSCALL, 0x80, "do_syscall_64");
	/* an unknown kernel address */
	uint64_t s3[] = { 0xffffffff8200dead, rt(&pie, a_main) + 8 };
	w_sample(w, 1 * MS, 100, 100, 1, 1, s3, 1);

	/* pid 200 forks from 100 and inherits its mappings and thread name */
	w_task(w, VP_REC_FORK, 2 * MS, 200, 100);
	w_sample(w, 4 * MS, 200, 200, 0, 3, s1, 1);

	/* a library mapped late: the same address is nothing at 3 ms, fx_lib_one at 6 ms */
	uint64_t s4[] = { rt(&lib, a_lib_one) + 5, rt(&pie, a_main) + 8 };
	w_sample(w, 3 * MS, 100, 100, 0, 2, s4, 1);
	w_mmap(w, 5 * MS, 100, &lib, NULL, false);
	w_sample(w, 6 * MS, 100, 100, 0, 2, s4, 1);

	/* pid 100 exits and the pid is reused by a new process that execs and maps libfx
	 * where the first one had fx-pie */
	w_task(w, VP_REC_EXIT, 10 * MS, 100, 1);
	w_task(w, VP_REC_FORK, 11 * MS, 100, 1);
	w_comm(w, 11 * MS, 100, 100, "other", true);
	w_mmap(w, 11 * MS, 100, &lib2, NULL, false);
	uint64_t s5[] = { rt(&lib2, a_lib_two) + 3 };
	w_sample(w, 12 * MS, 100, 100, 0, 1, s5, 1);

	/* pid 300: fx-cxx recorded with another build-id; fx-nosyms from a snapshot
	 * stamped after the sample */
	w_comm(w, 0, 300, 300, "cxx", false);
	uint8_t bad[20];
	memset(bad, 0xaa, sizeof(bad));
	w_mmap(w, 0, 300, &cxx, bad, true);
	uint64_t s6[] = { cxx.start + 0x10 };
	w_sample(w, 1 * MS, 300, 300, 0, 1, s6, 1);
	uint64_t s7[] = { nosyms.start + 0x20 };
	w_sample(w, 1 * MS, 300, 300, 0, 1, s7, 2);
	w_mmap(w, 5 * MS, 300, &nosyms, NULL, true);

	/* pid 400: a caller whose return address is the first byte of fx_alpha belongs
	 * to whatever precedes fx_alpha, never to fx_alpha itself */
	w_comm(w, 0, 400, 400, "ret", false);
	w_mmap(w, 0, 400, &pie, NULL, true);
	uint64_t s8[] = { rt(&pie, a_beta) + 5, rt(&pie, a_alpha) };
	w_sample(w, 1 * MS, 400, 400, 0, 2, s8, 1);

	/* pid 500: JIT code at one address, first A (epoch 0) then B (epoch 1) */
	w_comm(w, 0, 500, 500, "java", false);
	uint64_t s9[] = { JIT_ADDR + 0x10 };
	w_sample(w, 2 * MS, 500, 500, 0, 1, s9, 1);
	w_sample(w, 8 * MS, 500, 500, 0, 1, s9, 2);

	/* pid 600: a sample taken in the hypervisor (fx-nopie stands in for xen-syms) */
	w_comm(w, 0, 600, 600, "hv", false);
	uint64_t s10[] = { hv_ip };
	w_sample(w, 1 * MS, 600, 600, 1, 0, s10, 1);

	struct vp_lost lost = { UINT32_MAX, VP_LOST_KERNEL_RING, 7 };
	ASSERT_OK(cfile_writer__append(w, VP_REC_LOST, base + 13 * MS, &lost, sizeof(lost)));
	if (end) {
		struct vp_end e = { .samples = 14, .lost = 7, .duration_ns = 20 * MS };
		ASSERT_OK(cfile_writer__append(w, VP_REC_END, base + 20 * MS, &e, sizeof(e)));
	}
	ASSERT_OK(cfile_writer__close(w));
}

/* A JVM (pid 500) whose code maps put method A at JIT_ADDR in epoch 0 and, after a GC
 * freed it, method B at the same address in epoch 1; it ran without frame pointers. */
static void w_load(struct cfile_writer *w, uint64_t t, uint64_t id, const char *name)
{
	char buf[sizeof(struct vp_cm_method_load) + 64] = { 0 };
	struct vp_cm_method_load *m = (void *)buf;
	m->code_start = JIT_ADDR;
	m->code_size = 0x100;
	m->level = 4;
	m->method_id = id;
	m->name_len = (uint16_t)strlen(name);
	memcpy(m + 1, name, strlen(name));
	ASSERT_OK(cfile_writer__append(w, VP_CM_METHOD_LOAD, base + t, buf, sizeof(*m) + strlen(name)));
}

static void write_jit(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/jit", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/500", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/500/%s", dir, VP_CODEMAP_FILE);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	struct vp_cm_meta meta = { .pid = 500, .flags = 0, .agent_version = VP_AGENT_VERSION };
	ASSERT_OK(cfile_writer__append(w, VP_CM_META, base, &meta, sizeof(meta)));
	struct vp_cm_epoch_begin b0 = { 0, VP_EPOCH_START }, b1 = { 1, VP_EPOCH_GC };
	ASSERT_OK(cfile_writer__append(w, VP_CM_EPOCH_BEGIN, base, &b0, sizeof(b0)));
	w_load(w, 0, 11, "A.old()");
	struct vp_cm_method_unload u = { JIT_ADDR, 11 };
	ASSERT_OK(cfile_writer__append(w, VP_CM_METHOD_UNLOAD, base + 5 * MS, &u, sizeof(u)));
	struct vp_cm_epoch_end e0 = { 0 };
	ASSERT_OK(cfile_writer__append(w, VP_CM_EPOCH_END, base + 5 * MS, &e0, sizeof(e0)));
	ASSERT_OK(cfile_writer__append(w, VP_CM_EPOCH_BEGIN, base + 5 * MS, &b1, sizeof(b1)));
	w_load(w, 6 * MS, 12, "B.new()");
	ASSERT_OK(cfile_writer__close(w));
}

static char *folded(const struct vp_profile *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct vp_out o = { .f = f, .width = 100 };
	struct vp_report_opts ro = { .threads = true };
	ASSERT_OK(report_folded(p, &o, &ro));
	fclose(f);
	return buf;
}

static struct vp_profile *load(const char *dir, const struct vp_session_opts *o, int expect)
{
	struct vp_profile *p = vp_profile__new();
	char err[512] = "";
	int r = vp_session__load(dir, p, o, err, sizeof(err));
	if (r != expect)
		FAIL("load %s returned %d, expected %d: %s", dir, r, expect, err);
	return p;
}

static const struct vp_frame *frame_named(const struct vp_profile *p, const char *name)
{
	for (size_t i = 0; i < p->nframes; i++)
		if (!strcmp(p->frames[i].name, name))
			return &p->frames[i];
	FAIL("no frame %s", name);
}

/* What a load must give however many of the first pass's samples were kept for the
 * second: the same stacks, frames, locations, warnings and counts. */
static void same_profile(const struct vp_profile *a, const struct vp_profile *b)
{
	char *fa = folded(a), *fb = folded(b);
	ASSERT_STREQ(fa, fb);
	free(fa);
	free(fb);
	ASSERT_STREQ(a->warnings ? a->warnings : "", b->warnings ? b->warnings : "");
	ASSERT_UEQ(a->nstacks, b->nstacks);
	ASSERT_UEQ(a->nframes, b->nframes);
	ASSERT_UEQ(a->nlocations, b->nlocations);
	ASSERT_UEQ(a->nloc_stacks, b->nloc_stacks);
	ASSERT_UEQ(a->lost, b->lost);
	ASSERT_EQ(a->incomplete, b->incomplete);
}

/* The second pass resolves the samples the first kept and reads the file again from
 * the first chunk whose samples it did not keep: with room for none, a few, or all of
 * them, and with a damaged chunk before or after where the keeping stopped, the
 * profile is the same. Small chunks, so that the keeping stops inside the stream. */
/* Removes what the sessions written here leave beside stream.vps: JVM 500's code map,
 * its directories, and the session directory itself. */
static void remove_jit_and_dir(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/jit/500/%s", dir, VP_CODEMAP_FILE);
	unlink(path);
	snprintf(path, sizeof(path), "%s/jit/500", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/jit", dir);
	rmdir(path);
	rmdir(dir);
}

static void check_kept_samples(void)
{
	static const size_t budgets[] = { 0, 1, 100, 300, 700, 1500 };
	char dir[] = "/tmp/vp-test-session-keep-XXXXXX", path[600];
	ASSERT_NOT_NULL(mkdtemp(dir));
	write_session(dir, true, 256);
	write_jit(dir);
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	for (int damaged = 0; damaged < 3; damaged++) {
		if (damaged) {
			/* One byte of a payload, early and then late in the file. */
			struct stat st;
			ASSERT_OK(stat(path, &st));
			off_t at = damaged == 1 ? 300 : st.st_size * 3 / 4;
			int fd = open(path, O_RDWR);
			char byte;
			ASSERT_GE(fd, 0);
			ASSERT_EQ(pread(fd, &byte, 1, at), 1);
			byte ^= 0x5a;
			ASSERT_EQ(pwrite(fd, &byte, 1, at), 1);
			close(fd);
		}
		struct vp_profile *all = load(dir, NULL, 0);
		ASSERT_GT(all->nstacks, 0);
		if (damaged)
			ASSERT_CONTAINS(all->warnings, "damaged chunk");
		for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
			size_t old = vp_session__set_keep_bytes(budgets[i]);
			struct vp_profile *p = load(dir, NULL, 0);
			vp_session__set_keep_bytes(old);
			same_profile(all, p);
			vp_profile__free(p);
		}
		vp_profile__free(all);
	}
	unlink(path);
	remove_jit_and_dir(dir);
}

/* A record format newer than this reader: refused by name, not read as if it were ours. */
static void check_newer_format(void)
{
	char dir[] = "/tmp/vp-test-session-ver-XXXXXX", path[600], err[512] = "";
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, 99, 0, true);
	ASSERT_NOT_NULL(w);
	ASSERT_OK(cfile_writer__append(w, VP_REC_META, 1, "k\0v\0", 4));
	ASSERT_OK(cfile_writer__close(w));
	struct vp_profile *p = vp_profile__new();
	ASSERT_LT(vp_session__load(dir, p, NULL, err, sizeof(err)), 0);
	ASSERT_CONTAINS(err, "version 99");
	vp_profile__free(p);
	unlink(path);
	rmdir(dir);
}

/* Issue 33 item 6: warnings that are true for the session. A sample taken inside execve
 * holds the calling program's user stack (viprof's launcher before it execs the JVM):
 * one frame says so, and nothing is "in no recorded mapping". The agent's copy in a
 * container's /tmp, removed once loaded, is named from this viprof's agent (VIPROF_AGENT
 * here, libfx.so standing in) when the recorded build-id is the agent's, and only then. */
static void check_exec_and_agent_copy(void)
{
	char dir[] = "/tmp/vp-test-session-exec-XXXXXX", path[600], agent[600];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(agent, sizeof(agent), "%s/libviprof-jvmti.so", dir);
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", FX("libfx.so"), agent);
	ASSERT_EQ(run_sh(cmd, 110), 0);
	setenv("VIPROF_AGENT", agent, 1);   /* before anything asks viprof_agent_path() */
	struct vp_elfsym *es = vp_elfsym__new(NULL);
	ASSERT_NOT_NULL(es);
	struct vp_elf *e = vp_elfsym__open(es, agent, 0);
	ASSERT_NOT_NULL(e);
	const char *hexid = vp_elf__build_id(e);
	ASSERT_EQ(strlen(hexid), 40);
	uint8_t bid[20], other[20];
	for (int i = 0; i < 20; i++) {
		unsigned v;
		ASSERT_EQ(sscanf(hexid + 2 * i, "%2x", &v), 1);
		bid[i] = (uint8_t)v;
	}
	vp_elfsym__free(es);
	memset(other, 0x5b, sizeof(other));

	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	static const char meta[] = "backend\0bpf\0";
	ASSERT_OK(cfile_writer__append(w, VP_REC_META, base, meta, sizeof(meta)));
	struct vp_event_desc ev = { .index = 0, .perf_type = 1, .freq = 1000,
				    .flags = VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS };
	strcpy(ev.name, "cpu-clock");
	ASSERT_OK(cfile_writer__append(w, VP_REC_EVENT, base, &ev, sizeof(ev)));
	w_ksym(w, K_SYSCALL, 0x80, "do_syscall_64");
	w_ksym(w, K_SCHED, 0x100, "__x64_sys_execve");
	/* pid 700, in execve: the launcher's user frames, in no mapping of the new image. */
	w_comm(w, 0, 700, 700, "java", false);
	uint64_t ex[] = { K_SCHED + 0x10, K_SYSCALL + 0x20, 0x401000, 0x402000, 0x403000 };
	w_sample(w, 1 * MS, 700, 700, 2, 3, ex, 2);
	/* pid 800: the agent's removed copy, recorded with the agent's build-id; pid 900:
	 * the same name with another build-id (another viprof's agent). */
	struct map copy = mk_map(FX("libfx.so"), L_BIAS);
	copy.path = "/tmp/.viprof-gone/libviprof-jvmti.so (deleted)";
	w_comm(w, 0, 800, 800, "java", false);
	w_mmap(w, 0, 800, &copy, bid, true);
	uint64_t in_agent[] = { rt(&copy, a_lib_one) + 5 };
	w_sample(w, 1 * MS, 800, 800, 0, 1, in_agent, 1);
	w_comm(w, 0, 900, 900, "java", false);
	w_mmap(w, 0, 900, &copy, other, true);
	w_sample(w, 1 * MS, 900, 900, 0, 1, in_agent, 1);
	struct vp_end end = { .samples = 4, .duration_ns = 20 * MS };
	ASSERT_OK(cfile_writer__append(w, VP_REC_END, base + 20 * MS, &end, sizeof(end)));
	ASSERT_OK(cfile_writer__close(w));

	struct vp_profile *p = load(dir, NULL, 0);
	char *fo = folded(p);
	fprintf(stderr, "%s\nwarnings: %s\n", fo, p->warnings ? p->warnings : "");
	ASSERT_CONTAINS(fo, "java;[the program before exec];do_syscall_64_[k];__x64_sys_execve_[k] 2\n");
	ASSERT_NULL(p->warnings ? strstr(p->warnings, "in no recorded mapping") : NULL);
	ASSERT_CONTAINS(fo, "java;fx_lib_one 1\n");   /* pid 800 */
	/* pid 900's copy is not this agent: unnamed, and the warning says it could not be read. */
	ASSERT_CONTAINS(p->warnings, "libviprof-jvmti.so (deleted): cannot open for symbols");
	free(fo);
	vp_profile__free(p);
	unlink(path);
	unlink(agent);
	remove_jit_and_dir(dir);
}

int main(void)
{
	struct timespec ts;
	check_newer_format();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	base = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1000 * MS;  /* +1 s */
	pie = mk_map(FX("fx-pie"), P_BIAS);
	a_lib_one = nm_addr(FX("libfx.nm"), "fx_lib_one");
	check_exec_and_agent_copy();
	lib = mk_map(FX("libfx.so"), L_BIAS);
	lib2 = mk_map(FX("libfx.so"), P_BIAS);  /* where fx-pie was in pid 100's first life */
	cxx = mk_map(FX("fx-cxx"), 0x560000000000ull);
	nosyms = mk_map(FX("fx-nosyms"), 0x570000000000ull);
	a_alpha = nm_addr(FX("fx-pie.nm"), "fx_alpha");
	a_beta = nm_addr(FX("fx-pie.nm"), "fx_beta");
	a_main = nm_addr(FX("fx-pie.nm"), "main");
	a_lib_one = nm_addr(FX("libfx.nm"), "fx_lib_one");
	a_lib_two = nm_addr(FX("libfx.nm"), "fx_lib_two");
	hv_ip = nm_addr(FX("fx-nopie.nm"), "fx_beta") + 4;

	char dir[] = "/tmp/vp-test-session-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir));
	write_session(dir, true, 0);
	write_jit(dir);

	uint32_t pids[] = { 100, 200, 300 };
	struct vp_session_opts o = { .pids = pids, .npids = 3 };
	struct vp_profile *p = load(dir, &o, 0);
	ASSERT_EQ(p->nevents, 1);
	ASSERT_STREQ(p->events[0].name, "cpu-clock");
	ASSERT_STREQ(p->events[0].unit, "nanoseconds");
	ASSERT_STREQ(vp_profile__meta(p, "backend"), "bpf");
	ASSERT_STREQ(vp_profile__meta(p, "duration_ns"), "20000000");
	ASSERT_UEQ(p->lost, 7);
	ASSERT_FALSE(p->incomplete);

	/* Expected names of the pid-300 frames: fx-cxx is untrusted (build-id mismatch) so
	 * it is named by file offset; fx-nosyms by virtual address (nothing to name it). */
	struct seg sn = text_seg(FX("fx-nosyms"));
	uint64_t nos_v = (nosyms.start + 0x20 - nosyms.start + nosyms.pgoff) - sn.off + sn.vaddr;
	char expect[2048];
	snprintf(expect, sizeof(expect),
		 "app;main;[kernel] 0xffffffff8200dead_[k] 1\n"
		 "app;main;[unknown] 1\n"
		 "app;main;fx_beta;do_syscall_64_[k];schedule_[k] 2\n"
		 "app;main;fx_beta;fx_alpha 4\n"
		 "app;main;fx_lib_one 1\n"
		 "cxx;fx-cxx+0x%llx 1\n"
		 "cxx;fx-nosyms+0x%llx 2\n"
		 "other;fx_lib_two 1\n",
		 (unsigned long long)(0x10 + cxx.pgoff), (unsigned long long)nos_v);
	char *fo = folded(p);
	ASSERT_STREQ(fo, expect);
	free(fo);

	/* Layers and images. */
	ASSERT_EQ(frame_named(p, "schedule")->layer, VP_LAYER_KERNEL);
	ASSERT_STREQ(frame_named(p, "schedule")->image, "[kernel.kallsyms]");
	ASSERT_EQ(frame_named(p, "fx_alpha")->layer, VP_LAYER_NATIVE);
	ASSERT_STREQ(frame_named(p, "fx_lib_two")->image, FX("libfx.so"));
	ASSERT_UEQ(frame_named(p, "fx_lib_two")->addr, a_lib_two);
	ASSERT_EQ(frame_named(p, "[unknown]")->layer, VP_LAYER_UNKNOWN);
	ASSERT_CONTAINS(p->warnings, "fx-cxx: file changed since recording");
	ASSERT_CONTAINS(p->warnings, "1 sampled user addresses were in no recorded mapping");

	/* The text report shows the same facts. */
	char *txt = NULL;
	size_t tl = 0;
	FILE *f = open_memstream(&txt, &tl);
	struct vp_out out = { .f = f, .width = 120 };
	struct vp_report_opts ro = { 0 };
	ASSERT_OK(report_text(p, NULL, &out, &ro));
	fclose(f);
	ASSERT_CONTAINS(txt, "# event: cpu-clock (nanoseconds), 13 samples\n");
	ASSERT_CONTAINS(txt, "# lost: 7\n");
	ASSERT_CONTAINS(txt, "# duration: 0.020 s\n");
	ASSERT_CONTAINS(txt, "# backend: bpf\n");
	ASSERT_CONTAINS(txt, "# hypervisor: KVM\n");
	ASSERT_CONTAINS(txt, "#   kernel        23.1%          3\n");
	/* 4/13 is 30.77%, shown as 30.7: the rounding that makes the column add up to
	 * 100.0 gives the tenths to the 1- and 2-sample rows, whose remainders are larger. */
	ASSERT_CONTAINS(txt, "\n   30.7    30.8          4  native      fx_alpha ");
	ASSERT_CONTAINS(txt, "\n    7.7     7.7          1  native      fx-cxx+0x");
	ASSERT_NULL(strstr(txt, "fx_beta"));  /* never a leaf, so not in a self-sorted table */
	ASSERT_NULL(strstr(txt, "(other"));   /* every frame fits */
	free(txt);
	vp_profile__free(p);

	/* Callers at ip-1. */
	uint32_t p400[] = { 400 };
	o = (struct vp_session_opts){ .pids = p400, .npids = 1 };
	p = load(dir, &o, 0);
	ASSERT_EQ(p->nstacks, 1);
	ASSERT_EQ(p->stacks[0].nframes, 2);
	const struct vp_frame *root = &p->frames[p->stacks[0].frames[0]];
	ASSERT_TRUE(strcmp(root->name, "fx_alpha") != 0);
	ASSERT_STREQ(p->frames[p->stacks[0].frames[1]].name, "fx_beta");
	vp_profile__free(p);

	/* JIT frames resolve in the epoch of their sample's time; --map-mode flat gets the
	 * reused address wrong, as a perf-PID.map would. */
	uint32_t p500[] = { 500 };
	o = (struct vp_session_opts){ .pids = p500, .npids = 1 };
	p = load(dir, &o, 0);
	fo = folded(p);
	ASSERT_STREQ(fo, "java;A.old()_[j] 1\njava;B.new()_[j] 2\n");
	free(fo);
	ASSERT_CONTAINS(p->warnings, "JVM 500 ran without -XX:+PreserveFramePointer");
	vp_profile__free(p);
	o.map_mode_flat = true;
	p = load(dir, &o, 0);
	fo = folded(p);
	ASSERT_STREQ(fo, "java;B.new()_[j] 3\n");
	free(fo);
	vp_profile__free(p);

	/* Hypervisor frames: by address without --hv-syms; a file that is not a Xen image
	 * (fx-nopie, linked where user programs live) is refused. Naming them from a real
	 * Xen-addressed ELF is test-xen-session's. */
	uint32_t p600[] = { 600 };
	o = (struct vp_session_opts){ .pids = p600, .npids = 1, .hv_syms = FX("fx-nopie") };
	p = load(dir, &o, -EINVAL);
	vp_profile__free(p);
	o.hv_syms = NULL;
	p = load(dir, &o, 0);
	fo = folded(p);
	char hvexp[64];
	snprintf(hvexp, sizeof(hvexp), "hv;[hypervisor] 0x%llx 1\n", (unsigned long long)hv_ip);
	ASSERT_STREQ(fo, hvexp);
	free(fo);
	vp_profile__free(p);
	o.hv_syms = "/nonexistent/xen-syms";
	p = load(dir, &o, -ENOENT);
	vp_profile__free(p);

	/* Filters: comm, tid, time window (seconds since the file was created, which is
	 * up to a second before base). */
	o = (struct vp_session_opts){ .comm = "other" };
	p = load(dir, &o, 0);
	fo = folded(p);
	ASSERT_STREQ(fo, "other;fx_lib_two 1\n");
	free(fo);
	vp_profile__free(p);
	uint32_t tids[] = { 200 };
	o = (struct vp_session_opts){ .tids = tids, .ntids = 1 };
	p = load(dir, &o, 0);
	fo = folded(p);
	ASSERT_STREQ(fo, "app;main;fx_beta;fx_alpha 1\n");
	free(fo);
	vp_profile__free(p);
	struct cfile_reader *r;
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, NULL, 0);
	ASSERT_NOT_NULL(r);
	double rel = (double)(base - cfile_reader__header(r)->created_ns) / 1e9;
	cfile_reader__close(r);
	o = (struct vp_session_opts){ .pids = pids, .npids = 3, .t_from = rel + 0.0035, .t_to = rel + 0.0115 };
	p = load(dir, &o, 0);
	fo = folded(p);
	ASSERT_STREQ(fo, "app;main;fx_beta;fx_alpha 1\napp;main;fx_lib_one 1\n");
	free(fo);
	vp_profile__free(p);

	/* Merge: loading twice into one profile doubles the counts. */
	p = vp_profile__new();
	char err[512];
	o = (struct vp_session_opts){ .comm = "other" };
	ASSERT_OK(vp_session__load(dir, p, &o, err, sizeof(err)));
	ASSERT_OK(vp_session__load(dir, p, &o, err, sizeof(err)));
	fo = folded(p);
	ASSERT_STREQ(fo, "other;fx_lib_two 2\n");
	free(fo);
	vp_profile__free(p);

	/* No END record and a torn last chunk: loads what is complete, incomplete set. */
	char dir2[] = "/tmp/vp-test-session-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir2));
	write_session(dir2, false, 256);
	char path2[512];
	snprintf(path2, sizeof(path2), "%s/%s", dir2, VP_SESSION_STREAM);
	struct stat st;
	ASSERT_OK(stat(path2, &st));
	ASSERT_OK(truncate(path2, st.st_size - 7));
	p = load(dir2, NULL, 0);
	ASSERT_TRUE(p->incomplete);
	ASSERT_CONTAINS(p->warnings, "session ended without its end record (the recorder was killed, or could not write: a full disk?); read up to the last complete chunk");
	ASSERT_GT(p->nstacks, 0);
	ASSERT_UEQ(p->lost, 0);  /* the LOST record was in the torn chunk */
	vp_profile__free(p);

	/* A corrupt chunk: skipped, the rest read, one warning naming the file. */
	int fd = open(path2, O_RDWR);
	ASSERT_GE(fd, 0);
	char byte;
	ASSERT_EQ(pread(fd, &byte, 1, 200), 1);
	byte ^= 0x5a;
	ASSERT_EQ(pwrite(fd, &byte, 1, 200), 1);
	close(fd);
	p = vp_profile__new();
	err[0] = '\0';
	ASSERT_OK(vp_session__load(dir2, p, NULL, err, sizeof(err)));
	ASSERT_CONTAINS(p->warnings, path2);
	ASSERT_CONTAINS(p->warnings, "skipped 1 damaged chunk");
	ASSERT_GT(p->nstacks, 0);
	vp_profile__free(p);

	/* Records with random bodies inside valid chunks: every length is checked against
	 * its record, so loading never crashes and never fails. */
	char dir3[] = "/tmp/vp-test-session-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir3));
	char path3[512];
	snprintf(path3, sizeof(path3), "%s/%s", dir3, VP_SESSION_STREAM);
	struct cfile_writer *fw = cfile_writer__create(path3, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 4096, false);
	ASSERT_NOT_NULL(fw);
	srand(12345);
	struct vp_event_desc fev = { .index = 0 };
	strcpy(fev.name, "cpu-clock");
	ASSERT_OK(cfile_writer__append(fw, VP_REC_EVENT, base, &fev, sizeof(fev)));
	for (int i = 0; i < 20000; i++) {
		uint8_t body[256];
		size_t len = (size_t)(rand() % 256);
		for (size_t j = 0; j < len; j++)
			body[j] = (uint8_t)(rand() % 4 ? rand() % 4 : rand());  /* small numbers, like pids */
		if (rand() % 2 && len >= sizeof(struct vp_sample)) {
			struct vp_sample *fs = (void *)body;
			fs->event = 0;
			fs->nr_kernel = (uint16_t)(rand() % 8);
			fs->nr_user = (uint16_t)(rand() % 40);
		}
		ASSERT_OK(cfile_writer__append(fw, (uint32_t)(1 + rand() % 15), base + (uint64_t)(rand() % 1000) * MS,
					       body, len));
	}
	ASSERT_OK(cfile_writer__close(fw));
	p = load(dir3, NULL, 0);
	vp_profile__free(p);
	unlink(path3);
	rmdir(dir3);

	check_kept_samples();

	/* A directory without a session. */
	p = vp_profile__new();
	ASSERT_EQ(vp_session__load("/nonexistent/session", p, NULL, err, sizeof(err)), -ENOENT);
	ASSERT_CONTAINS(err, "/nonexistent/session/stream.vps");
	vp_profile__free(p);

	unlink(path);
	unlink(path2);
	remove_jit_and_dir(dir);
	rmdir(dir2);
	return 0;
}
