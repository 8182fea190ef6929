/* perf_event mmap ring buffers and the sideband records they carry (MMAP2, COMM, FORK,
 * EXIT, LOST, SWITCH_CPU_WIDE), shared by the perf backend (where they share the ring with samples) and
 * the bpf backend (a dummy event per CPU just for sideband). Internal to sampler-kernel/. */
#ifndef VIPROF_SAMPLER_PERF_RING_H
#define VIPROF_SAMPLER_PERF_RING_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/perf_event.h>
#include "sampler-kernel/sampler.h"

/* The read_format of every sampling event: read() at stop gives {value,
 * time_enabled, time_running}, the totals of the event's COUNTER record. */
#define VP_READ_FORMAT (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING)

/* CLOCK_MONOTONIC now, in nanoseconds (the time of records a sampler makes itself). */
uint64_t vp_sampler_now_ns(void);

int vp_perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		       unsigned long flags);

/* One mmap'ed ring of one perf event fd (the fd stays owned by the caller). */
struct perf_ring;
struct perf_ring *perf_ring__open(int fd, size_t data_pages);  /* NULL + errno */
int perf_ring__fd(const struct perf_ring *r);
/* Calls cb for every complete record, in order; records that wrap around the end of
 * the ring are copied so that cb always sees one contiguous record. Stops at the
 * first cb error. Returns the number of records or -errno. */
int perf_ring__drain(struct perf_ring *r,
		     int (*cb)(void *ctx, const struct perf_event_header *h), void *ctx);
void perf_ring__free(struct perf_ring *r);     /* accepts NULL */

/* A set of process ids (tgids), for following launch/-p targets through forks. */
struct pid_set;
struct pid_set *pid_set__new(void);            /* NULL + errno */
int pid_set__add(struct pid_set *s, uint32_t pid);
bool pid_set__has(const struct pid_set *s, uint32_t pid);
void pid_set__free(struct pid_set *s);         /* accepts NULL */
void pid_set__clear(struct pid_set *s);        /* empties it, keeping its memory */

/* The sample_id trailer (sample_id_all) of a non-sample record, per attr.sample_type. */
struct perf_sample_id {
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu;
	uint64_t id;
};
int perf_sample_id__parse(const struct perf_event_header *h, uint64_t sample_type,
			  struct perf_sample_id *out);

/* Turns sideband records into session records. */
struct perf_sideband {
	uint64_t sample_type;          /* of the events whose ring this is */
	struct pid_set *filter;        /* NULL = every process; else only these (grows on FORK) */
	/* Optional: asked about a pid the filter does not hold; true = it is followed
	 * (and added). The CPUs' rings are drained in turn, so a child's COMM or MMAP
	 * can be read before the FORK that made it; an authority that saw the fork
	 * when it happened (the BPF tracked map) closes that gap. */
	bool (*follows)(void *ctx, uint32_t pid);
	void *follows_ctx;
	/* The pids follows() said no to in this batch (perf_sideband__batch): asked once
	 * per drain, not at each of their records. Internal. */
	struct pid_set *declined;
	/* Optional (follows_ctx is its ctx): true when pid was no longer the recorded
	 * user's at time (a set-uid exec): its records from then on are dropped. */
	bool (*foreign)(void *ctx, uint32_t pid, uint64_t time);
	const struct vp_sink *sink;
	uint64_t lost;                 /* sum of PERF_RECORD_LOST counts seen (not emitted) */
	uint64_t emitted;
};
/* Handles one record if it is a sideband record: 1 if it was one (emitted or filtered
 * out), 0 if not sideband (e.g. PERF_RECORD_SAMPLE), -errno on a malformed record or
 * a sink error. */
int perf_sideband__handle(struct perf_sideband *sb, const struct perf_event_header *h);
/* A new drain begins: pids follows() declined are asked about again (a process can
 * only become followed at its fork, which puts it in the authority's map before any
 * record of its own: within one drain, a no stays a no). */
void perf_sideband__batch(struct perf_sideband *sb);
/* Frees what the sideband allocated itself (not filter); accepts a zeroed one. */
void perf_sideband__fini(struct perf_sideband *sb);

#endif
