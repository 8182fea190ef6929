/* The container-labelling sink: see container.h. */
#define _GNU_SOURCE
#include "recorder/container.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/container.h"
#include "common/session_format.h"

struct vp_container_sink {
	pthread_mutex_t mu;
	struct vp_sink next;
	uint32_t *seen;          /* open addressing, 0 = empty (pid 0 is never labelled) */
	size_t cap, n;
	bool lazy;               /* label at a process's first sample only */
};

static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t got = 0;
	ssize_t k;

	if (fd < 0)
		return -errno;
	while (got < len - 1 && (k = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)k;
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

static uint64_t ns_inode(const char *pid, const char *ns)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%s/ns/%s", pid, ns);
	return stat(path, &st) ? 0 : (uint64_t)st.st_ino;
}

int vp_container__emit(pid_t pid, uint64_t time, const struct vp_sink *sink, uint32_t *nspid)
{
	char path[64], text[8192], spid[16];
	union {
		struct vp_container c;
		char raw[sizeof(struct vp_container) + PATH_MAX];
	} body;
	struct vp_container *c = &body.c;

	snprintf(spid, sizeof(spid), "%d", (int)pid);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	ssize_t n = read_small(path, text, sizeof(text));
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int)n;
	memset(c, 0, sizeof(*c));
	size_t cl = vp_container__pick_cgroup(text, c->cgroup, PATH_MAX);
	c->pid = c->nspid = (uint32_t)pid;
	c->pidns = ns_inode(spid, "pid");
	c->mntns = ns_inode(spid, "mnt");
	/* Ours never changes: read once. */
	static _Atomic uint64_t host_pidns;
	if (!host_pidns)
		host_pidns = ns_inode("self", "pid");
	c->host_pidns = host_pidns;
	/* In our pid namespace the pid is its own: no status to read (most processes). */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((!c->pidns || c->pidns != c->host_pidns) && read_small(path, text, sizeof(text)) > 0) {
		char *ns = strstr(text, "\nNSpid:");
		/* The last field is the pid in the process's own namespace. */
		for (char *s = ns ? ns + 7 : NULL, *end; s;) {
			long v = strtol(s, &end, 10);
			if (end == s)
				break;
			c->nspid = (uint32_t)v;
			s = end;
		}
	}
	if (nspid)
		*nspid = c->nspid;
	return sink->emit(sink->ctx, VP_REC_CONTAINER, time, c, sizeof(*c) + cl + 1);
}

/* Bit 31 of a seen entry: the process lives in another pid namespace (pids stay below
 * 2^22, the kernel's pid_max limit). */
#define OTHER_NS 0x80000000u
/* Bit 30, lazy labelling only: the process exec'd since it was labelled (it may have
 * moved): label it again at its next sample. */
#define RELABEL 0x40000000u
#define PID_OF(e) ((e) & ~(OTHER_NS | RELABEL))

/* Marks pid seen; true if it was not. *slot gets its entry. Under mu. */
static bool first_time(struct vp_container_sink *cs, uint32_t pid, uint32_t **slot)
{
	*slot = NULL;
	if ((cs->n + 1) * 2 > cs->cap) {
		size_t ncap = cs->cap ? cs->cap * 2 : 1024;
		uint32_t *ns = calloc(ncap, sizeof(*ns));
		if (!ns)
			return false;   /* no memory: label nothing more rather than everything again */
		for (size_t i = 0; i < cs->cap; i++) {
			if (!cs->seen[i])
				continue;
			size_t j = (PID_OF(cs->seen[i]) * 2654435761u) & (ncap - 1);
			while (ns[j])
				j = (j + 1) & (ncap - 1);
			ns[j] = cs->seen[i];
		}
		free(cs->seen);
		cs->seen = ns;
		cs->cap = ncap;
	}
	size_t j = (pid * 2654435761u) & (cs->cap - 1);
	while (cs->seen[j]) {
		if (PID_OF(cs->seen[j]) == pid) {
			*slot = &cs->seen[j];
			return false;
		}
		j = (j + 1) & (cs->cap - 1);
	}
	cs->seen[j] = pid;
	cs->n++;
	*slot = &cs->seen[j];
	return true;
}

/* pid's entry, or NULL when not seen in this session. Under mu. */
static uint32_t *find_slot(struct vp_container_sink *cs, uint32_t pid)
{
	if (!cs->cap)
		return NULL;
	for (size_t j = (pid * 2654435761u) & (cs->cap - 1); cs->seen[j]; j = (j + 1) & (cs->cap - 1))
		if (PID_OF(cs->seen[j]) == pid)
			return &cs->seen[j];
	return NULL;
}

/* The thread's tid in its own pid namespace (the last NSpid field), 0 if unknown. */
static uint32_t ns_tid(uint32_t pid, uint32_t tid)
{
	char path[96], text[4096];
	uint32_t v = 0;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/status", pid, tid);
	if (read_small(path, text, sizeof(text)) <= 0)
		return 0;
	char *ns = strstr(text, "\nNSpid:");
	for (char *s = ns ? ns + 7 : NULL, *end; s;) {
		long x = strtol(s, &end, 10);
		if (end == s)
			break;
		v = (uint32_t)x;
		s = end;
	}
	return v;
}

/* VP_REC_NSTID for every thread of pid but its main one, as they are now. */
static int emit_nstids(uint32_t pid, uint64_t time, const struct vp_sink *next)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;   /* gone: no more samples of it either */
	int e = 0;
	for (struct dirent *de; !e && (de = readdir(d));) {
		uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
		if (!tid || tid == pid)
			continue;
		struct vp_nstid t = { .pid = pid, .tid = tid, .nstid = ns_tid(pid, tid) };
		if (t.nstid)
			e = next->emit(next->ctx, VP_REC_NSTID, time, &t, sizeof(t));
	}
	closedir(d);
	return e;
}

static int emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct vp_container_sink *cs = ctx;
	uint32_t pid = 0, tid = 0, *slot = NULL;
	bool label = false, other_ns = false;

	if ((type == VP_REC_SAMPLE && len >= sizeof(struct vp_sample)) ||
	    (type == VP_REC_COMM && len >= sizeof(struct vp_comm)))
		memcpy(&pid, body, sizeof(pid));   /* both begin with the pid */
	if (type == VP_REC_COMM && len >= sizeof(struct vp_comm))
		tid = ((const struct vp_comm *)body)->tid;
	if (type == VP_REC_FORK && len >= sizeof(struct vp_task)) {
		pid = ((const struct vp_task *)body)->pid;
		tid = ((const struct vp_task *)body)->tid;
	}
	pthread_mutex_lock(&cs->mu);
	struct vp_sink next = cs->next;
	if (pid) {
		/* An exec may move a process into a container (runtimes exec the
		 * container's command after joining its cgroup): label it again. */
		bool exec = type == VP_REC_COMM && ((const struct vp_comm *)body)->exec;
		if (type == VP_REC_FORK)   /* a FORK labels nothing: the process may still move */
			slot = find_slot(cs, pid);
		else if (!cs->lazy)
			label = first_time(cs, pid, &slot) || exec;
		else if (type == VP_REC_SAMPLE)
			label = first_time(cs, pid, &slot) || (slot && (*slot & RELABEL));
		else if ((slot = find_slot(cs, pid)) && exec)
			*slot |= RELABEL;
		other_ns = slot && (*slot & OTHER_NS);
	}
	pthread_mutex_unlock(&cs->mu);
	if (label) {
		uint32_t nspid = 0;
		int e = vp_container__emit((pid_t)pid, time, &next, &nspid);
		if (e && e != -ESRCH && e != -EACCES && e != -EPERM)
			return e;
		other_ns = !e && nspid && nspid != pid;
		pthread_mutex_lock(&cs->mu);
		if ((slot = find_slot(cs, pid)))
			*slot = other_ns ? ((*slot & ~RELABEL) | OTHER_NS) : PID_OF(*slot);
		pthread_mutex_unlock(&cs->mu);
		/* Labelled late: the threads that began before it get their tid in the
		 * container now (later ones with their FORK or COMM, below). */
		if (cs->lazy && other_ns && (e = emit_nstids(pid, time, &next)))
			return e;
	}
	/* A thread of a process in another pid namespace: its tid there, for the agent's
	 * thread names (it knows its threads by that tid). */
	if (other_ns && tid && tid != pid) {
		struct vp_nstid t = { .pid = pid, .tid = tid, .nstid = ns_tid(pid, tid) };
		int e = t.nstid ? next.emit(next.ctx, VP_REC_NSTID, time, &t, sizeof(t)) : 0;
		if (e)
			return e;
	}
	return next.emit(next.ctx, type, time, body, len);
}

struct vp_container_sink *vp_container_sink__new(struct vp_sink next)
{
	struct vp_container_sink *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return NULL;
	pthread_mutex_init(&cs->mu, NULL);
	cs->next = next;
	return cs;
}

struct vp_sink vp_container_sink__sink(struct vp_container_sink *cs)
{
	return (struct vp_sink){ .emit = emit, .ctx = cs };
}

void vp_container_sink__set_lazy(struct vp_container_sink *cs)
{
	cs->lazy = true;
}

void vp_container_sink__retarget(struct vp_container_sink *cs, struct vp_sink next)
{
	pthread_mutex_lock(&cs->mu);
	cs->next = next;
	if (cs->seen)
		memset(cs->seen, 0, cs->cap * sizeof(*cs->seen));
	cs->n = 0;
	pthread_mutex_unlock(&cs->mu);
}

void vp_container_sink__free(struct vp_container_sink *cs)
{
	if (!cs)
		return;
	pthread_mutex_destroy(&cs->mu);
	free(cs->seen);
	free(cs);
}
