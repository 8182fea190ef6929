/* How hotspot/ reads a JVM's memory: one reader type, three readers. Everything in
 * hotspot/ reads through a struct vp_hs_mem, so the same code runs in the recorder
 * (another process), in the agent (its own process) and in unit tests (a fake JVM's
 * memory built in a buffer). */
#ifndef VIPROF_HOTSPOT_MEMORY_H
#define VIPROF_HOTSPOT_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads len bytes at addr of the target's memory; 0 or -errno. */
typedef int (*vp_mem_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

struct vp_hs_mem {
	vp_mem_read_fn read;
	void *ctx;
};

static inline int vp_hs_mem__read(const struct vp_hs_mem *m, uint64_t addr, void *buf, size_t len)
{
	return m->read(m->ctx, addr, buf, len);
}

/* This process through process_vm_readv, which fails instead of faulting where the JVM
 * freed or unmapped the memory (metadata, a thread, an nmethod's malloc'ed data); the
 * first page always fails. */
extern const struct vp_hs_mem vp_hs_mem_self;
/* This process through plain loads, for memory known to stay mapped while it is read:
 * libjvm's exported tables and the committed part of the code heaps (the agent's walk,
 * which reads them millions of times). Never in the recorder. */
extern const struct vp_hs_mem vp_hs_mem_direct;

/* Another process: process_vm_readv, falling back to /proc/PID/mem where that is
 * refused (a seccomp filter, a kernel without it), or /proc/PID/mem only (proc_mem_only,
 * so tests can check both give the same). vp_hs_pid_mem__close releases it. */
struct vp_hs_pid_mem {
	pid_t pid;
	bool proc_mem_only;
	bool use_proc_mem;       /* process_vm_readv was refused once: /proc/PID/mem from then on */
	int memfd;
	struct vp_hs_mem mem;    /* the reader: pass &pm->mem */
};
void vp_hs_pid_mem__init(struct vp_hs_pid_mem *pm, pid_t pid, bool proc_mem_only);
void vp_hs_pid_mem__close(struct vp_hs_pid_mem *pm);

/* A NUL-terminated string of fewer than len bytes at a, read a piece at a time (a short
 * string may end just before an unmapped page). 0; -ENAMETOOLONG when it has no NUL
 * within len (out then holds its first len - 1 bytes); -EFAULT or the reader's error. */
int vp_hs_mem__str(const struct vp_hs_mem *m, uint64_t a, char *out, size_t len);

#endif
