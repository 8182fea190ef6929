/* Thread names in a report, on synthetic sessions (issue 12):
 *  - a forked thread whose own COMM reaches the stream before its FORK (each CPU's
 *    buffer is drained in turn) keeps its own name, not its parent's; a tid reused by a
 *    later thread gets the new parent's name at its fork;
 *  - one whose own COMM is stamped before its FORK (the recorder's /proc snapshot of a
 *    thread born as recording began, CPU clocks apart) keeps its own name too;
 *  - a JVM's code map that names a thread in full (THREAD_NAME) gives the report that
 *    name where the kernel's name is its first 15 bytes; not after the thread ended
 *    (its tid reused), not for a thread renamed since; --comm takes either name;
 *  - the java launcher's main thread, which keeps the process's kernel name ("java"),
 *    gets the agent's name for it ("main", issue 22);
 *  - a JVM in another pid namespace (a container), whose agent names its threads by
 *    their tids there: the NSTID records map them (issue 22).
 */
#include <errno.h>
#include <sys/stat.h>
#include <time.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "maps/codemap_format.h"
#include "postproc/session.h"
#include "test.h"
#include "test-profile.h"

#define MS 1000000ull

static uint64_t base;

static void w_comm(struct cfile_writer *w, uint64_t t, uint32_t pid, uint32_t tid, const char *c)
{
	struct vp_comm r = { .pid = pid, .tid = tid };
	strncpy(r.comm, c, sizeof(r.comm) - 1);
	ASSERT_OK(cfile_writer__append(w, VP_REC_COMM, base + t, &r, sizeof(r)));
}

static void w_task(struct cfile_writer *w, uint32_t type, uint64_t t, uint32_t pid, uint32_t tid, uint32_t ptid)
{
	struct vp_task r = { .pid = pid, .ppid = pid, .tid = tid, .ptid = ptid };
	ASSERT_OK(cfile_writer__append(w, type, base + t, &r, sizeof(r)));
}

static void w_sample(struct cfile_writer *w, uint64_t t, uint32_t pid, uint32_t tid)
{
	char buf[sizeof(struct vp_sample) + 8] = { 0 };
	struct vp_sample *s = (void *)buf;
	s->pid = pid;
	s->tid = tid;
	s->mode = VP_MODE_USER;
	s->period = 1000000;
	s->nr_user = 1;
	s->ips[0] = 0x1000;
	ASSERT_OK(cfile_writer__append(w, VP_REC_SAMPLE, base + t, buf, sizeof(*s) + 8));
}

static void write_stream(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	static const char meta[] = "backend\0bpf\0";
	ASSERT_OK(cfile_writer__append(w, VP_REC_META, base, meta, sizeof(meta)));
	struct vp_event_desc ev = { .index = 0, .perf_type = 1, .freq = 1000,
				    .flags = VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS };
	strcpy(ev.name, "cpu-clock");
	ASSERT_OK(cfile_writer__append(w, VP_REC_EVENT, base, &ev, sizeof(ev)));
	w_comm(w, 0, 100, 100, "java");
	/* Thread 101: its own name (5 ms) drained from its CPU's buffer before the parent's
	 * FORK (4 ms) from another. */
	w_comm(w, 5 * MS, 100, 101, "C2 CompilerThre");
	w_task(w, VP_REC_FORK, 4 * MS, 100, 101, 100);
	/* Thread 102: an old thread of that tid, gone, then a new one forked at 20 ms that
	 * never renamed itself: the parent's name from its fork on. */
	w_comm(w, 1 * MS, 100, 102, "old-worker");
	w_task(w, VP_REC_EXIT, 2 * MS, 100, 102, 100);
	w_task(w, VP_REC_FORK, 20 * MS, 100, 102, 100);
	/* Thread 103: a Java thread with a name longer than 15 characters. */
	w_task(w, VP_REC_FORK, 6 * MS, 100, 103, 100);
	w_comm(w, 7 * MS, 100, 103, "viprof-long-thr");
	/* Thread 104: renamed natively to something else than its Java name. */
	w_task(w, VP_REC_FORK, 6 * MS, 100, 104, 100);
	w_comm(w, 7 * MS, 100, 104, "native-name");
	/* Thread 105: its own name stamped (8 ms) before its FORK (9 ms), in either
	 * stream order: 105 COMM first, 106 FORK first. */
	w_comm(w, 8 * MS, 100, 105, "GC Thread#0");
	w_task(w, VP_REC_FORK, 9 * MS, 100, 105, 100);
	w_task(w, VP_REC_FORK, 9 * MS, 100, 106, 100);
	w_comm(w, 8 * MS, 100, 106, "G1 Main Marker");
	/* Thread 107: a pool thread named in full by the agent, ended at 20 ms; its tid is
	 * reused at 22 ms by a thread the agent never named. Sampled in both lives. */
	w_task(w, VP_REC_FORK, 6 * MS, 100, 107, 100);
	w_comm(w, 7 * MS, 100, 107, "pool-1-thread-1");
	w_sample(w, 10 * MS, 100, 107);
	w_task(w, VP_REC_EXIT, 21 * MS, 100, 107, 100);
	w_task(w, VP_REC_FORK, 22 * MS, 100, 107, 100);
	w_comm(w, 22 * MS, 100, 107, "pool-1-thread-1");
	/* Thread 108: started before the agent attached (a preexisting record at 25 ms). */
	w_task(w, VP_REC_FORK, 2 * MS, 100, 108, 100);
	w_comm(w, 3 * MS, 100, 108, "Common-Cleaner-");
	/* Thread 109: the launcher's main thread, never named natively: "java". */
	w_task(w, VP_REC_FORK, 2 * MS, 100, 109, 100);
	for (uint32_t tid = 101; tid <= 109; tid++)
		w_sample(w, 30 * MS, 100, tid);
	/* Process 200 in a container (pid 1 there), thread 201 is tid 7 there. */
	char cbuf[sizeof(struct vp_container) + 16] = { 0 };
	struct vp_container *c = (struct vp_container *)cbuf;
	c->pid = 200;
	c->nspid = 1;
	c->pidns = 4026532178ull;
	c->host_pidns = 4026531836ull;
	strcpy(c->cgroup, "/");
	ASSERT_OK(cfile_writer__append(w, VP_REC_CONTAINER, base, cbuf, sizeof(*c) + 2));
	w_comm(w, 0, 200, 200, "java");
	w_task(w, VP_REC_FORK, 2 * MS, 200, 201, 200);
	struct vp_nstid nt = { .pid = 200, .tid = 201, .nstid = 7 };
	ASSERT_OK(cfile_writer__append(w, VP_REC_NSTID, base + 2 * MS, &nt, sizeof(nt)));
	w_comm(w, 3 * MS, 200, 201, "container-long-");
	w_sample(w, 30 * MS, 200, 201);
	struct vp_end end = { 0 };
	ASSERT_OK(cfile_writer__append(w, VP_REC_END, base + 40 * MS, &end, sizeof(end)));
	ASSERT_OK(cfile_writer__close(w));
}

static void w_thread(struct cfile_writer *w, uint64_t t, uint32_t tid, uint16_t flags, const char *name)
{
	char buf[sizeof(struct vp_cm_thread_name) + 64];
	struct vp_cm_thread_name x = { .tid = tid, .name_len = (uint16_t)strlen(name), .flags = flags };
	memcpy(buf, &x, sizeof(x));
	memcpy(buf + sizeof(x), name, x.name_len);
	ASSERT_OK(cfile_writer__append(w, VP_CM_THREAD_NAME, base + t, buf, sizeof(x) + x.name_len));
}

/* jit/200/codemap.vpm of the container's JVM: thread 7 (201 on the host) in full, and
 * a thread 201 of its own namespace that must not be taken for the host's 201. */
static void write_container_codemap(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/jit/200", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/200/%s", dir, VP_CODEMAP_FILE);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	struct vp_cm_meta meta = { .pid = 1, .agent_version = VP_AGENT_VERSION };
	ASSERT_OK(cfile_writer__append(w, VP_CM_META, base, &meta, sizeof(meta)));
	struct vp_cm_epoch_begin b = { 0, VP_EPOCH_START };
	ASSERT_OK(cfile_writer__append(w, VP_CM_EPOCH_BEGIN, base, &b, sizeof(b)));
	w_thread(w, 5 * MS, 7, VP_CM_THREAD_PREEXISTING, "container-long-thread-name");
	w_thread(w, 5 * MS, 201, VP_CM_THREAD_PREEXISTING, "container-long-wrong-thread");
	ASSERT_OK(cfile_writer__close(w));
}

/* jit/100/codemap.vpm, as the agent writes it: full names of threads 103, 104, 107, 108. */
static void write_codemap(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/jit", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/100", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/100/%s", dir, VP_CODEMAP_FILE);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	struct vp_cm_meta meta = { .pid = 100, .agent_version = VP_AGENT_VERSION };
	ASSERT_OK(cfile_writer__append(w, VP_CM_META, base, &meta, sizeof(meta)));
	struct vp_cm_epoch_begin b = { 0, VP_EPOCH_START };
	ASSERT_OK(cfile_writer__append(w, VP_CM_EPOCH_BEGIN, base, &b, sizeof(b)));
	/* ThreadStart trails the thread's first instructions (its COMM at 7 ms). */
	w_thread(w, 8 * MS, 103, 0, "viprof-long-thread-name-worker");
	/* Renamed natively since: the kernel's "native-name" is not this name's prefix. */
	w_thread(w, 6 * MS, 104, 0, "java-name-of-104-thread");
	w_thread(w, 6 * MS, 107, 0, "pool-1-thread-12");
	w_thread(w, 20 * MS, 107, VP_CM_THREAD_ENDED, "");
	w_thread(w, 25 * MS, 108, VP_CM_THREAD_PREEXISTING, "Common-Cleaner-Thread");
	w_thread(w, 25 * MS, 109, VP_CM_THREAD_PREEXISTING, "main");
	ASSERT_OK(cfile_writer__close(w));
}

static const char *comm_of(const struct vp_profile *p, uint32_t tid)
{
	for (size_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].tid == tid)
			return p->stacks[i].comm;
	FAIL("no stack of thread %u", tid);
}

/* How many samples thread tid has under the name comm. */
static uint64_t samples_named(const struct vp_profile *p, uint32_t tid, const char *comm)
{
	return (uint64_t)tp_sum(p, &(struct tp_filter){ .tid = tid, .comm = comm }, NULL, TP_EXACT, NULL);
}

int main(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	base = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1000 * MS;
	char dir[] = "/tmp/viprof-thread-names.XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir));
	write_stream(dir);
	write_codemap(dir);
	write_container_codemap(dir);

	struct vp_profile *p = vp_profile__new();
	char err[512] = "";
	ASSERT_NOT_NULL(p);
	ASSERT_OK(vp_session__load(dir, p, NULL, err, sizeof(err)));
	ASSERT_STREQ(comm_of(p, 101), "C2 CompilerThre");
	ASSERT_STREQ(comm_of(p, 102), "java");
	ASSERT_STREQ(comm_of(p, 104), "native-name");
	ASSERT_STREQ(comm_of(p, 105), "GC Thread#0");
	ASSERT_STREQ(comm_of(p, 106), "G1 Main Marker");
	/* Full names from the agent. */
	ASSERT_STREQ(comm_of(p, 103), "viprof-long-thread-name-worker");
	ASSERT_STREQ(comm_of(p, 108), "Common-Cleaner-Thread");
	ASSERT_STREQ(comm_of(p, 109), "main");
	ASSERT_STREQ(comm_of(p, 201), "container-long-thread-name");
	ASSERT_EQ(samples_named(p, 107, "pool-1-thread-12"), 1);   /* its first life */
	ASSERT_EQ(samples_named(p, 107, "pool-1-thread-1"), 1);    /* the tid's next thread */
	vp_profile__free(p);

	/* --comm selects by the full name as well as by the kernel's. */
	struct vp_session_opts o = { .comm = "viprof-long-thread-name-worker" };
	p = vp_profile__new();
	ASSERT_OK(vp_session__load(dir, p, &o, err, sizeof(err)));
	ASSERT_EQ(p->nstacks, 1);
	ASSERT_EQ(p->stacks[0].tid, 103);
	vp_profile__free(p);
	o.comm = "viprof-long-thr";
	p = vp_profile__new();
	ASSERT_OK(vp_session__load(dir, p, &o, err, sizeof(err)));
	ASSERT_EQ(p->nstacks, 1);
	ASSERT_STREQ(p->stacks[0].comm, "viprof-long-thread-name-worker");
	vp_profile__free(p);

	printf("ok\n");
	return 0;
}
