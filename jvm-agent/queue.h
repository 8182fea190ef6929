/* The agent's record queue: JVMTI callbacks append finished records to one of two
 * preallocated halves while the agent thread writes the other; and the table of method
 * ids whose METHOD_NAME is queued or written. Its raw monitor also guards the agent
 * thread's own state (agent.c), which waits on it for records.
 *
 * Callbacks only call vp_queue__lock, __reserve*, __trim, __drop, __named, __add_named
 * and __unlock_notify: none of them allocates, and only the replaying thread ever waits
 * (for room). Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_QUEUE_H
#define VIPROF_JVM_AGENT_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jvmti.h>

/* Each of the two halves; only touched pages cost memory. */
#define VP_QUEUE_BYTES (8u << 20)

/* At setup: the halves, the name table and the monitor. 0, or -errno with *what naming
 * what failed. */
int vp_queue__init(jvmtiEnv *jvmti, const char **what);

/* The monitor exists (vp_queue__init got that far). */
bool vp_queue__ready(void);
void vp_queue__lock(void);
void vp_queue__unlock(void);
/* Unlocks, waking the writer only once the queue is half full: a wakeup per record put
 * a context switch on every compiled method (the cost the sampler avoids with its ring
 * buffer). The writer also wakes every second on its own, and a full queue wakes it too. */
void vp_queue__unlock_notify(void);
void vp_queue__notify_all(void);
void vp_queue__wait(jlong ms);

/* Reserves a record (zeroed) under the lock; NULL when full (counted as a drop), except
 * on a replaying thread (vp_queue__replaying), which waits for the writer to make room. */
void *vp_queue__reserve(uint32_t type, uint64_t time, size_t body_len);
/* Queues one record whose body is head (hlen bytes) then tail (tlen bytes) then tail2
 * (t2len bytes): takes the lock briefly, never waits for room. */
void vp_queue__put(uint32_t type, uint64_t time, const void *head, size_t hlen, const void *tail, size_t tlen,
		   const void *tail2, size_t t2len);
/* The same, not zeroed: for a body whose size is only bounded (vp_queue__trim). */
void *vp_queue__reserve_raw(uint32_t type, uint64_t time, size_t body_len);
/* The last record reserved used only used bytes of its body: the rest goes back to the
 * queue and the padding is cleared. */
void vp_queue__trim(void *body, size_t used);
/* One event lost without a reservation (counted into every EPOCH_END). */
void vp_queue__drop(void);
/* This thread is ours for a while (GenerateEvents, the class enumeration): waiting for
 * room stalls no Java code, so it waits instead of dropping. */
void vp_queue__replaying(bool on);
/* Whether a writer runs that a replaying thread may wait for (under the lock). */
void vp_queue__writer(bool running);

/* Under the lock: what is queued, its length, and taking it (the halves swap). */
size_t vp_queue__len(void);
size_t vp_queue__take(const uint8_t **buf);
/* The events dropped so far (takes the lock; says so on stderr once per session). */
uint64_t vp_queue__dropped(void);
/* Under the lock: a new session begins; names are queued again into its map, the drop
 * count starts over, and with discard what is queued belongs to no session. */
void vp_queue__new_session(bool discard);

/* The first slot for address a in an open-addressing table of mask + 1 slots (a power
 * of two, at least 512): addresses in one 4 KiB page keep their order in one run of 512
 * slots, and the pages are spread by a multiplicative hash. One class's jmethodIDs (one
 * block, 8 bytes apart) and Method*s then share the table's cache lines and pages: each
 * lookup of a random slot missed the cache and, in a VM, the TLB (a 2 MiB table, walked
 * for every method of every prepared class). */
static inline size_t vp_near_slot(uint64_t a, size_t mask)
{
	uint64_t page = (a >> 12) * 0x9e3779b97f4a7c15ull;
	return (size_t)(((page >> 40) << 9) | ((a >> 3) & 511)) & mask;
}

/* Whether a METHOD_NAME for id is queued or written. Lock-free: a slot only ever goes
 * from 0 to an id (vp_queue__add_named, under the lock), so a reader sees either. A false
 * "no" only costs a duplicate name, which readers tolerate. */
bool vp_queue__named(uint64_t id);
/* Under the lock. A full table just means names get queued again. */
void vp_queue__add_named(uint64_t id);

#endif
