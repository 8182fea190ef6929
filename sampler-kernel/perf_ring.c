/* perf mmap rings and sideband parsing; see perf_ring.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common/session_format.h"
#include "common/util.h"
#include "sampler-kernel/perf_ring.h"

uint64_t vp_sampler_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int vp_perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		       unsigned long flags)
{
	long fd = syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);

	return fd < 0 ? -errno : (int)fd;
}

struct perf_ring {
	int fd;
	size_t page;
	size_t data_size;              /* a power of two */
	struct perf_event_mmap_page *meta;
	unsigned char *data;
	unsigned char *scratch;        /* for records that wrap around */
	size_t scratch_size;
};

struct perf_ring *perf_ring__open(int fd, size_t data_pages)
{
	struct perf_ring *r;
	size_t n = 1;
	void *m;

	/* The kernel wants 2^n data pages. */
	while (n < data_pages)
		n <<= 1;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd = fd;
	r->page = (size_t)sysconf(_SC_PAGESIZE);
	r->data_size = n * r->page;
	m = mmap(NULL, r->page + r->data_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;

		free(r);
		errno = e;
		return NULL;
	}
	r->meta = m;
	r->data = (unsigned char *)m + r->page;
	return r;
}

int perf_ring__fd(const struct perf_ring *r)
{
	return r->fd;
}

int perf_ring__drain(struct perf_ring *r,
		     int (*cb)(void *ctx, const struct perf_event_header *h), void *ctx)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	uint64_t mask = r->data_size - 1;
	int n = 0, err = 0;

	while (tail < head) {
		const struct perf_event_header *h = (const void *)(r->data + (tail & mask));
		size_t off = tail & mask, size;

		/* The header itself never wraps: records are 8-byte aligned. */
		size = h->size;
		if (size < sizeof(*h) || size > head - tail) {
			err = -EBADMSG;
			break;
		}
		if (off + size > r->data_size) {
			size_t first = r->data_size - off;

			if (vp_grow((void **)&r->scratch, &r->scratch_size, size, 1)) {
				err = -ENOMEM;
				break;
			}
			memcpy(r->scratch, r->data + off, first);
			memcpy(r->scratch + first, r->data, size - first);
			h = (const void *)r->scratch;
		}
		err = cb(ctx, h);
		tail += size;
		if (err < 0)
			break;
		n++;
	}
	/* Hand the space back to the kernel only after we are done reading it. */
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
	return err < 0 ? err : n;
}

void perf_ring__free(struct perf_ring *r)
{
	if (!r)
		return;
	munmap(r->meta, r->page + r->data_size);
	free(r->scratch);
	free(r);
}

/* Open addressing with linear probing; 0 marks an empty slot, so pid 0 (the idle
 * task) is stored in a flag of its own. */
struct pid_set {
	uint32_t *slot;
	size_t cap, used;
	bool has_zero;
};

struct pid_set *pid_set__new(void)
{
	struct pid_set *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cap = 64;
	s->slot = calloc(s->cap, sizeof(*s->slot));
	if (!s->slot) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

static size_t pid_hash(uint32_t pid, size_t cap)
{
	return (pid * 2654435761u) & (cap - 1);
}

static void pid_set__insert(uint32_t *slot, size_t cap, uint32_t pid)
{
	size_t i = pid_hash(pid, cap);

	while (slot[i] && slot[i] != pid)
		i = (i + 1) & (cap - 1);
	slot[i] = pid;
}

int pid_set__add(struct pid_set *s, uint32_t pid)
{
	if (pid == 0) {
		s->has_zero = true;
		return 0;
	}
	if (pid_set__has(s, pid))
		return 0;
	if ((s->used + 1) * 2 > s->cap) {
		size_t cap = s->cap * 2;
		uint32_t *slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i])
				pid_set__insert(slot, cap, s->slot[i]);
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	pid_set__insert(s->slot, s->cap, pid);
	s->used++;
	return 0;
}

bool pid_set__has(const struct pid_set *s, uint32_t pid)
{
	size_t i;

	if (pid == 0)
		return s->has_zero;
	for (i = pid_hash(pid, s->cap); s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (s->slot[i] == pid)
			return true;
	return false;
}

void pid_set__free(struct pid_set *s)
{
	if (!s)
		return;
	free(s->slot);
	free(s);
}

void pid_set__clear(struct pid_set *s)
{
	if (!s || (!s->used && !s->has_zero))
		return;
	memset(s->slot, 0, s->cap * sizeof(*s->slot));
	s->used = 0;
	s->has_zero = false;
}

int perf_sample_id__parse(const struct perf_event_header *h, uint64_t st,
			  struct perf_sample_id *out)
{
	size_t n = 0, off;
	const unsigned char *p;

	n += !!(st & PERF_SAMPLE_TID) + !!(st & PERF_SAMPLE_TIME) + !!(st & PERF_SAMPLE_ID) +
	     !!(st & PERF_SAMPLE_STREAM_ID) + !!(st & PERF_SAMPLE_CPU) +
	     !!(st & PERF_SAMPLE_IDENTIFIER);
	if (h->size < sizeof(*h) + n * 8)
		return -EBADMSG;
	memset(out, 0, sizeof(*out));
	off = h->size - n * 8;
	p = (const unsigned char *)h + off;
	/* The trailer's order is fixed by the kernel (perf_event_open(2), sample_id). */
	if (st & PERF_SAMPLE_TID) {
		memcpy(&out->pid, p, 4);
		memcpy(&out->tid, p + 4, 4);
		p += 8;
	}
	if (st & PERF_SAMPLE_TIME) {
		memcpy(&out->time, p, 8);
		p += 8;
	}
	if (st & PERF_SAMPLE_ID) {
		memcpy(&out->id, p, 8);
		p += 8;
	}
	if (st & PERF_SAMPLE_STREAM_ID)
		p += 8;
	if (st & PERF_SAMPLE_CPU) {
		memcpy(&out->cpu, p, 4);
		p += 8;
	}
	if (st & PERF_SAMPLE_IDENTIFIER)
		memcpy(&out->id, p, 8);
	return (int)(n * 8);
}

static bool wanted(struct perf_sideband *sb, uint32_t pid)
{
	if (!sb->filter || pid_set__has(sb->filter, pid))
		return true;
	if (!sb->follows || (sb->declined && pid_set__has(sb->declined, pid)))
		return false;
	if (sb->follows(sb->follows_ctx, pid)) {
		/* Cache it; if memory runs out we just ask again next time. */
		pid_set__add(sb->filter, pid);
		return true;
	}
	/* Likewise: without memory the next record asks again. */
	if (sb->declined || (sb->declined = pid_set__new()))
		pid_set__add(sb->declined, pid);
	return false;
}

void perf_sideband__batch(struct perf_sideband *sb)
{
	pid_set__clear(sb->declined);
}

void perf_sideband__fini(struct perf_sideband *sb)
{
	pid_set__free(sb->declined);
	sb->declined = NULL;
}

static int emit(struct perf_sideband *sb, uint32_t type, uint64_t time, const void *b, size_t len)
{
	int err = sb->sink->emit(sb->sink->ctx, type, time, b, len);

	if (err == 0)
		sb->emitted++;
	return err;
}

/* PERF_RECORD_MMAP2 body up to the filename (perf_event_open(2)). */
struct mmap2_body {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	union {
		struct { uint32_t maj, min; uint64_t ino, ino_generation; };
		struct { uint8_t build_id_size, reserved1; uint16_t reserved2; uint8_t build_id[20]; };
	};
	uint32_t prot, flags;
	char filename[];
};

static int handle_mmap2(struct perf_sideband *sb, const struct perf_event_header *h,
			size_t body_len, uint64_t time)
{
	const struct mmap2_body *m = (const void *)(h + 1);
	struct vp_mmap *out;
	size_t flen, len;
	int err;

	if (body_len < sizeof(*m) + 1)
		return -EBADMSG;
	if (!wanted(sb, m->pid))
		return 1;
	flen = strnlen(m->filename, body_len - sizeof(*m));
	len = sizeof(*out) + flen + 1;
	out = calloc(1, len);
	if (!out)
		return -ENOMEM;
	out->pid = m->pid;
	out->tid = m->tid;
	out->start = m->addr;
	out->len = m->len;
	out->pgoff = m->pgoff;
	if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		out->build_id_size = m->build_id_size > 20 ? 20 : m->build_id_size;
		memcpy(out->build_id, m->build_id, out->build_id_size);
	} else {
		out->maj = m->maj;
		out->min = m->min;
		out->ino = m->ino;
	}
	out->prot = m->prot;
	out->flags = m->flags;
	memcpy(out->filename, m->filename, flen);
	err = emit(sb, VP_REC_MMAP, time, out, len);
	free(out);
	return err < 0 ? err : 1;
}

int perf_sideband__handle(struct perf_sideband *sb, const struct perf_event_header *h)
{
	struct perf_sample_id sid;
	size_t body_len;
	int n, err;

	switch (h->type) {
	case PERF_RECORD_MMAP2: case PERF_RECORD_COMM: case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT: case PERF_RECORD_LOST: case PERF_RECORD_SWITCH_CPU_WIDE:
		break;
	default:
		return 0;
	}
	n = perf_sample_id__parse(h, sb->sample_type, &sid);
	if (n < 0)
		return n;
	body_len = h->size - sizeof(*h) - (size_t)n;
	/* The process's own pid is the first field of each of these bodies. */
	if (sb->foreign && h->type != PERF_RECORD_LOST && h->type != PERF_RECORD_SWITCH_CPU_WIDE &&
	    body_len >= 4 && sb->foreign(sb->follows_ctx, *(const uint32_t *)(h + 1), sid.time))
		return 1;

	switch (h->type) {
	case PERF_RECORD_MMAP2:
		return handle_mmap2(sb, h, body_len, sid.time);
	case PERF_RECORD_COMM: {
		const struct { uint32_t pid, tid; char comm[]; } *c = (const void *)(h + 1);
		struct vp_comm out = {0};

		if (body_len < 8)
			return -EBADMSG;
		if (!wanted(sb, c->pid))
			return 1;
		out.pid = c->pid;
		out.tid = c->tid;
		out.exec = !!(h->misc & PERF_RECORD_MISC_COMM_EXEC);
		memcpy(out.comm, c->comm, body_len - 8 < 15 ? body_len - 8 : 15);
		out.comm[15] = 0;
		err = emit(sb, VP_REC_COMM, sid.time, &out, sizeof(out));
		return err < 0 ? err : 1;
	}
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT: {
		const struct { uint32_t pid, ppid, tid, ptid; uint64_t time; } *t = (const void *)(h + 1);
		struct vp_task out;

		if (body_len < sizeof(*t))
			return -EBADMSG;
		/* A new process whose parent we follow is followed too. */
		if (h->type == PERF_RECORD_FORK && sb->filter && t->pid != t->ppid &&
		    pid_set__has(sb->filter, t->ppid)) {
			err = pid_set__add(sb->filter, t->pid);
			if (err)
				return err;
		}
		if (!wanted(sb, t->pid))
			return 1;
		out = (struct vp_task){ .pid = t->pid, .ppid = t->ppid, .tid = t->tid, .ptid = t->ptid };
		err = emit(sb, h->type == PERF_RECORD_FORK ? VP_REC_FORK : VP_REC_EXIT,
			   sid.time, &out, sizeof(out));
		return err < 0 ? err : 1;
	}
	case PERF_RECORD_SWITCH_CPU_WIDE: {
		const struct { uint32_t next_prev_pid, next_prev_tid; } *w = (const void *)(h + 1);
		struct vp_switch out = { .cpu = sid.cpu };

		/* Each switch is reported twice (out of prev, into next); the switch-out
		 * half has both sides: prev in the sample_id, next in the body. */
		if (body_len < sizeof(*w))
			return -EBADMSG;
		if (!(h->misc & PERF_RECORD_MISC_SWITCH_OUT))
			return 1;
		out.prev_pid = sid.pid;
		out.prev_tid = sid.tid;
		out.next_pid = w->next_prev_pid;
		out.next_tid = w->next_prev_tid;
		/* A task that is exiting is no longer "alive" to perf, which then reports
		 * its ids as -1 (kept: the next task is what attribution needs); on this
		 * 6.18 kernel such switches sometimes come with next equal to prev, which
		 * says nothing, so those are dropped. */
		if (out.prev_pid == out.next_pid && out.prev_tid == out.next_tid)
			return 1;
		err = emit(sb, VP_REC_SWITCH, sid.time, &out, sizeof(out));
		return err < 0 ? err : 1;
	}
	case PERF_RECORD_LOST: {
		const struct { uint64_t id, lost; } *l = (const void *)(h + 1);

		/* Summed here and emitted as totals when the sampler stops, so that a
		 * reader can add up LOST records without counting anything twice. */
		if (body_len < sizeof(*l))
			return -EBADMSG;
		sb->lost += l->lost;
		return 1;
	}
	}
	return 0;
}
