/* The perf mmap ring reader and the sideband parser on synthetic data (no root, no
 * perf): records that wrap around the end of the ring arrive whole, MMAP2/COMM/FORK/
 * EXIT/SWITCH/LOST become the right session records, -p filtering follows forks, and
 * malformed records are refused instead of read past their end. */
#define _GNU_SOURCE
#include <sys/mman.h>
#include "sampler-kernel/perf_ring.h"
#include "test-sampler-util.h"

#define ST (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU)

/* Builds one sideband record with its sample_id trailer {pid,tid,time,cpu}. */
static size_t build(unsigned char *out, uint32_t type, uint16_t misc, const void *body,
		    size_t blen, uint32_t pid, uint64_t time, uint32_t cpu)
{
	struct perf_event_header h = { .type = type, .misc = misc };
	size_t pad = (8 - blen % 8) % 8, off = sizeof(h);
	uint32_t ids[2] = { pid, pid };
	uint32_t c[2] = { cpu, 0 };

	h.size = (uint16_t)(sizeof(h) + blen + pad + 24);
	memcpy(out, &h, sizeof(h));
	memcpy(out + off, body, blen);
	memset(out + off + blen, 0, pad);
	off += blen + pad;
	memcpy(out + off, ids, 8);
	memcpy(out + off + 8, &time, 8);
	memcpy(out + off + 16, c, 8);
	return h.size;
}

static int handle(void *ctx, const struct perf_event_header *h)
{
	int r = perf_sideband__handle(ctx, h);

	return r < 0 ? r : 0;
}

static void test_ring_wrap(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = memfd_create("ring", 0);
	struct mem_sink m = { .keep_stacks = true };
	struct vp_sink sink = { mem_sink__emit, &m };
	struct perf_sideband sb = { .sample_type = ST, .sink = &sink };
	struct perf_event_mmap_page *meta;
	unsigned char *data, rec[256];
	struct perf_ring *r;
	struct { uint32_t pid, tid; char comm[16]; } comm = { 42, 42, "wrapped-comm" };
	uint64_t pos;
	size_t n;

	ASSERT_GE(fd, 0);
	ASSERT_OK(ftruncate(fd, 2 * page));
	meta = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_TRUE(meta != MAP_FAILED);
	data = (unsigned char *)meta + page;
	r = perf_ring__open(fd, 1);
	ASSERT_NOT_NULL(r);

	/* Start 16 bytes before the end of the data page so the record wraps. */
	pos = (uint64_t)page - 16;
	meta->data_tail = pos;
	n = build(rec, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, &comm, sizeof(comm), 42, 777, 1);
	for (size_t i = 0; i < n; i++)
		data[(pos + i) % page] = rec[i];
	meta->data_head = pos + n;
	ASSERT_EQ(perf_ring__drain(r, handle, &sb), 1);
	ASSERT_EQ(m.n, 1);
	ASSERT_EQ(m.r[0].type, VP_REC_COMM);
	ASSERT_UEQ(m.r[0].time, 777);
	{
		const struct vp_comm *c = m.r[0].body;

		ASSERT_EQ(c->pid, 42);
		ASSERT_EQ(c->exec, 1);
		ASSERT_STREQ(c->comm, "wrapped-comm");
	}
	/* The tail was handed back to the kernel. */
	ASSERT_UEQ(meta->data_tail, pos + n);

	/* A record claiming more bytes than were written is refused. */
	n = build(rec, PERF_RECORD_COMM, 0, &comm, sizeof(comm), 42, 778, 1);
	memcpy(data + (meta->data_tail % page), rec, 8);
	meta->data_head = meta->data_tail + 8;
	ASSERT_EQ(perf_ring__drain(r, handle, &sb), -EBADMSG);

	perf_ring__free(r);
	munmap(meta, 2 * page);
	close(fd);
	mem_sink__clear(&m);
}

static void test_sideband(void)
{
	struct mem_sink m = { .keep_stacks = true };
	struct vp_sink sink = { mem_sink__emit, &m };
	struct pid_set *follow = pid_set__new();
	struct perf_sideband sb = { .sample_type = ST, .sink = &sink, .filter = follow };
	unsigned char rec[512], body[256];
	struct { uint32_t pid, ppid, tid, ptid; uint64_t time; } task;
	struct { uint32_t pid, tid; uint64_t addr, len, pgoff; uint32_t maj, min; uint64_t ino, gen;
		 uint32_t prot, flags; char name[24]; } mm;
	struct { uint64_t id, lost; } lost = { 1, 5 };
	struct { uint32_t npid, ntid; } sw = { 300, 301 };
	size_t n;

	ASSERT_NOT_NULL(follow);
	ASSERT_OK(pid_set__add(follow, 100));

	/* 100 forks 200: 200 is followed; 999 forks 998: not. */
	task = (typeof(task)){ 200, 100, 200, 100, 0 };
	build(rec, PERF_RECORD_FORK, 0, &task, sizeof(task), 200, 10, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	task = (typeof(task)){ 998, 999, 998, 999, 0 };
	build(rec, PERF_RECORD_FORK, 0, &task, sizeof(task), 998, 11, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	ASSERT_TRUE(pid_set__has(follow, 200));
	ASSERT_FALSE(pid_set__has(follow, 998));

	memset(&mm, 0, sizeof(mm));
	mm.pid = mm.tid = 200;
	mm.addr = 0x400000;
	mm.len = 0x1000;
	mm.maj = 8;
	mm.ino = 1234;
	mm.prot = PROT_READ | PROT_EXEC;
	strcpy(mm.name, "/usr/bin/thing");
	build(rec, PERF_RECORD_MMAP2, 0, &mm, sizeof(mm), 200, 12, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	mm.pid = 998;
	build(rec, PERF_RECORD_MMAP2, 0, &mm, sizeof(mm), 998, 13, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);   /* filtered out */

	build(rec, PERF_RECORD_SWITCH_CPU_WIDE, PERF_RECORD_MISC_SWITCH_OUT, &sw, sizeof(sw), 555, 14, 1);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	build(rec, PERF_RECORD_SWITCH_CPU_WIDE, 0, &sw, sizeof(sw), 555, 15, 1); /* the "in" half */
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);

	build(rec, PERF_RECORD_LOST, 0, &lost, sizeof(lost), 0, 16, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	build(rec, PERF_RECORD_LOST, 0, &lost, sizeof(lost), 0, 17, 1);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	ASSERT_UEQ(sb.lost, 10);

	task = (typeof(task)){ 200, 100, 200, 100, 0 };
	build(rec, PERF_RECORD_EXIT, 0, &task, sizeof(task), 200, 18, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);

	/* A sample is not sideband. */
	build(rec, PERF_RECORD_SAMPLE, 0, &lost, sizeof(lost), 0, 19, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 0);

	/* FORK, MMAP, SWITCH, EXIT: in order, with the trailer's times. */
	ASSERT_EQ(m.n, 4);
	ASSERT_EQ(m.r[0].type, VP_REC_FORK);
	ASSERT_UEQ(m.r[0].time, 10);
	ASSERT_EQ(((struct vp_task *)m.r[0].body)->ppid, 100);
	ASSERT_EQ(m.r[1].type, VP_REC_MMAP);
	{
		const struct vp_mmap *x = m.r[1].body;

		ASSERT_EQ(m.r[1].len, sizeof(*x) + strlen("/usr/bin/thing") + 1);
		ASSERT_STREQ(x->filename, "/usr/bin/thing");
		ASSERT_UEQ(x->start, 0x400000);
		ASSERT_UEQ(x->ino, 1234);
		ASSERT_EQ(x->maj, 8);
		ASSERT_EQ(x->build_id_size, 0);
	}
	ASSERT_EQ(m.r[2].type, VP_REC_SWITCH);
	{
		const struct vp_switch *w = m.r[2].body;

		ASSERT_EQ(w->cpu, 1);
		ASSERT_EQ(w->prev_pid, 555);
		ASSERT_EQ(w->next_pid, 300);
		ASSERT_EQ(w->next_tid, 301);
	}
	ASSERT_EQ(m.r[3].type, VP_REC_EXIT);

	/* Malformed: a body too short for its type, and a size below the trailer. */
	n = build(rec, PERF_RECORD_FORK, 0, body, 4, 200, 20, 0);
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), -EBADMSG);
	((struct perf_event_header *)rec)->size = 16;
	ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), -EBADMSG);
	(void)n;
	ASSERT_EQ(m.n, 4);

	pid_set__free(follow);
	mem_sink__clear(&m);
}

static void test_pid_set(void)
{
	struct pid_set *s = pid_set__new();

	ASSERT_NOT_NULL(s);
	for (uint32_t p = 1; p < 5000; p += 3)
		ASSERT_OK(pid_set__add(s, p));
	for (uint32_t p = 1; p < 5000; p++)
		ASSERT_EQ(pid_set__has(s, p), (p - 1) % 3 == 0);
	ASSERT_FALSE(pid_set__has(s, 0));
	ASSERT_OK(pid_set__add(s, 0));
	ASSERT_TRUE(pid_set__has(s, 0));
	pid_set__free(s);
	pid_set__free(NULL);
}

/* The recorder drains every CPU's sideband ring; on a VM that keeps starting programs
 * most records are other processes', and asking the kernel's tracked map about each
 * was a bpf() call per record (1100 a second here). A pid it said no to is asked
 * again only in the next batch (perf_sideband__batch, once per drain): within one, a
 * process that is not followed does not become followed (a followed child is in the
 * map from its fork on, before any record of its own). */
static uint32_t asked_followed;
static int asked;

static bool follows_counted(void *ctx, uint32_t pid)
{
	(void)ctx;
	asked++;
	return pid == asked_followed;
}

static void test_follows_asked_once_per_batch(void)
{
	struct mem_sink m = { .keep_stacks = true };
	struct vp_sink sink = { mem_sink__emit, &m };
	struct pid_set *follow = pid_set__new();
	struct perf_sideband sb = { .sample_type = ST, .sink = &sink, .filter = follow,
				    .follows = follows_counted };
	unsigned char rec[512];
	struct { uint32_t pid, tid; uint64_t addr, len, pgoff; uint32_t maj, min; uint64_t ino, gen;
		 uint32_t prot, flags; char name[24]; } mm;

	ASSERT_NOT_NULL(follow);
	memset(&mm, 0, sizeof(mm));
	mm.pid = mm.tid = 700;
	mm.addr = 0x400000;
	mm.len = 0x1000;
	mm.prot = PROT_READ | PROT_EXEC;
	strcpy(mm.name, "/usr/bin/other");
	perf_sideband__batch(&sb);
	for (int i = 0; i < 5; i++) {
		build(rec, PERF_RECORD_MMAP2, 0, &mm, sizeof(mm), 700, 20 + (uint64_t)i, 0);
		ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	}
	ASSERT_EQ(asked, 1);
	ASSERT_EQ(m.n, 0);
	/* The next batch asks again, and a pid followed by then is taken (and kept). */
	asked_followed = 700;
	perf_sideband__batch(&sb);
	for (int i = 0; i < 3; i++) {
		build(rec, PERF_RECORD_MMAP2, 0, &mm, sizeof(mm), 700, 30 + (uint64_t)i, 0);
		ASSERT_EQ(perf_sideband__handle(&sb, (void *)rec), 1);
	}
	ASSERT_EQ(asked, 2);
	ASSERT_EQ(m.n, 3);
	ASSERT_TRUE(pid_set__has(follow, 700));
	mem_sink__clear(&m);
	perf_sideband__fini(&sb);
	pid_set__free(follow);
}

int main(void)
{
	test_ring_wrap();
	test_sideband();
	test_pid_set();
	test_follows_asked_once_per_batch();
	return 0;
}
