/* The agent's record queue (jvm-agent/queue.h). */
#include "jvm-agent/queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/chunkfile.h"

#define SEEN_SLOTS (1u << 18) /* method ids already named; open addressing, no growth */

static struct {
	jvmtiEnv *jvmti;
	jrawMonitorID lock;
	/* Under lock. */
	uint8_t *buf[2];
	size_t len;
	int cur;
	uint64_t dropped;
	bool writer;           /* a writer runs that makes room */
	bool warned;           /* the drops were reported (once a session) */
	uint64_t *seen;        /* jmethodIDs with a METHOD_NAME queued; 0 = empty slot */
	size_t nseen;
} q;

static __thread bool tl_replaying;

int vp_queue__init(jvmtiEnv *jvmti, const char **what)
{
	q.jvmti = jvmti;
	q.buf[0] = malloc(VP_QUEUE_BYTES);
	q.buf[1] = malloc(VP_QUEUE_BYTES);
	q.seen = calloc(SEEN_SLOTS, sizeof(*q.seen));
	if (!q.buf[0] || !q.buf[1] || !q.seen) {
		*what = "allocating the event queue";
		return -ENOMEM;
	}
	if ((*jvmti)->CreateRawMonitor(jvmti, "viprof-queue", &q.lock) != JVMTI_ERROR_NONE) {
		*what = "CreateRawMonitor";
		return -EINVAL;
	}
	return 0;
}

bool vp_queue__ready(void) { return q.lock != NULL; }
void vp_queue__lock(void) { (*q.jvmti)->RawMonitorEnter(q.jvmti, q.lock); }
void vp_queue__unlock(void) { (*q.jvmti)->RawMonitorExit(q.jvmti, q.lock); }
void vp_queue__notify_all(void) { (*q.jvmti)->RawMonitorNotifyAll(q.jvmti, q.lock); }
void vp_queue__wait(jlong ms) { (*q.jvmti)->RawMonitorWait(q.jvmti, q.lock, ms); }

void vp_queue__unlock_notify(void)
{
	if (q.len >= VP_QUEUE_BYTES / 2)
		vp_queue__notify_all();
	vp_queue__unlock();
}

static void *reserve(uint32_t type, uint64_t time, size_t body_len, bool zero)
{
	size_t size = (sizeof(struct vp_record) + body_len + 7) & ~(size_t)7;
	if (size > VP_MAX_RECORD_SIZE) {
		q.dropped++;
		return NULL;
	}
	while (q.len + size > VP_QUEUE_BYTES) {
		if (!tl_replaying || !q.writer) {
			q.dropped++;
			return NULL;
		}
		vp_queue__notify_all();
		vp_queue__wait(100);
	}
	struct vp_record *r = (struct vp_record *)(q.buf[q.cur] + q.len);
	if (zero)
		memset(r, 0, size);
	r->type = type;
	r->size = (uint32_t)size;
	r->time = time;
	q.len += size;
	return r + 1;
}

void *vp_queue__reserve(uint32_t type, uint64_t time, size_t body_len)
{
	return reserve(type, time, body_len, true);
}

void *vp_queue__reserve_raw(uint32_t type, uint64_t time, size_t body_len)
{
	return reserve(type, time, body_len, false);
}

void vp_queue__trim(void *body, size_t used)
{
	struct vp_record *r = (struct vp_record *)body - 1;
	uint32_t size = (uint32_t)((sizeof(*r) + used + 7) & ~(size_t)7);

	memset((uint8_t *)body + used, 0, size - sizeof(*r) - used);
	q.len -= r->size - size;
	r->size = size;
}

void vp_queue__drop(void)
{
	q.dropped++;
}

void vp_queue__replaying(bool on)
{
	tl_replaying = on;
}

void vp_queue__writer(bool running)
{
	q.writer = running;
}

size_t vp_queue__len(void)
{
	return q.len;
}

size_t vp_queue__take(const uint8_t **buf)
{
	size_t n = q.len;

	*buf = q.buf[q.cur];
	q.cur ^= 1;
	q.len = 0;
	return n;
}

uint64_t vp_queue__dropped(void)
{
	vp_queue__lock();
	uint64_t dropped = q.dropped;
	bool warn = dropped && !q.warned;
	q.warned |= warn;
	vp_queue__unlock();
	if (warn)
		/* Once a session: the count itself goes into every EPOCH_END. */
		fprintf(stderr, "viprof agent: event queue full, %llu events dropped; some JIT frames may be unnamed\n",
			(unsigned long long)dropped);
	return dropped;
}

void vp_queue__new_session(bool discard)
{
	memset(q.seen, 0, SEEN_SLOTS * sizeof(*q.seen));
	q.nseen = 0;
	q.dropped = 0;
	q.warned = false;
	if (discard)
		q.len = 0;
}

static size_t seen_slot(uint64_t id)
{
	return vp_near_slot(id, SEEN_SLOTS - 1);
}

bool vp_queue__named(uint64_t id)
{
	for (size_t i = seen_slot(id), k = 0; k < SEEN_SLOTS; i = (i + 1) & (SEEN_SLOTS - 1), k++) {
		uint64_t v = __atomic_load_n(&q.seen[i], __ATOMIC_ACQUIRE);
		if (v == id)
			return true;
		if (!v)
			return false;
	}
	return false;
}

void vp_queue__add_named(uint64_t id)
{
	if (q.nseen >= SEEN_SLOTS / 2)
		return;
	size_t i = seen_slot(id);
	while (q.seen[i] && q.seen[i] != id)
		i = (i + 1) & (SEEN_SLOTS - 1);
	if (!q.seen[i]) {
		__atomic_store_n(&q.seen[i], id, __ATOMIC_RELEASE);
		q.nseen++;
	}
}

void vp_queue__put(uint32_t type, uint64_t time, const void *head, size_t hlen, const void *tail, size_t tlen,
		   const void *tail2, size_t t2len)
{
	vp_queue__lock();
	uint8_t *b = vp_queue__reserve(type, time, hlen + tlen + t2len);
	if (b) {
		memcpy(b, head, hlen);
		if (tlen)
			memcpy(b + hlen, tail, tlen);
		if (t2len)
			memcpy(b + hlen + tlen, tail2, t2len);
	}
	vp_queue__unlock_notify();
}
