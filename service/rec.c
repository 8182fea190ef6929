/* The service's recordings (rec.h), driven as a 'viprof record -a -g' child: the
 * recorder library (daemon/recorder.h) is being carved out of record on another
 * branch; this file is the one place that changes when it lands. The child is the
 * same code path as 'viprof record', so its sessions are what users know. */
#define _GNU_SOURCE
#include "service/rec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/launch.h"
#include "common/util.h"

struct vp_svc_rec {
	struct vp_held_child child;
	int status;
	bool done;
	uint64_t cpu_ns;      /* the child's CPU time, read while it runs or from wait4 */
	char dir[4096];
};

static uint64_t proc_cpu_ns(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	/* After the comm: state, then fields 4..13; utime and stime are fields 14 and 15. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	long hz = sysconf(_SC_CLK_TCK);
	return (ut + st) * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
}

struct vp_svc_rec *vp_svc_rec__start(const struct vp_svc_rec_opts *o, char *err, size_t errlen)
{
	char freq[32], secs[32];
	const char *argv[24];
	int n = 0, e;
	struct vp_svc_rec *r = calloc(1, sizeof(*r));
	if (!r) {
		vp_set_err(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	r->child = (struct vp_held_child){ .pid = -1, .go_fd = -1, .exec_fd = -1 };
	snprintf(r->dir, sizeof(r->dir), "%s", o->dir);
	snprintf(freq, sizeof(freq), "%llu", (unsigned long long)o->freq);
	argv[n++] = o->viprof;
	argv[n++] = "record";
	argv[n++] = "-a";
	argv[n++] = "-g";
	argv[n++] = "-q";
	argv[n++] = "-F";
	argv[n++] = freq;
	if (o->seconds > 0) {
		snprintf(secs, sizeof(secs), "%.3f", o->seconds);
		argv[n++] = "-d";
		argv[n++] = secs;
	}
	if (o->no_jit) {
		argv[n++] = "--no-jit";
	} else if (o->jvm_attach) {
		argv[n++] = "--jvm-attach";
		argv[n++] = o->jvm_attach;
	}
	argv[n++] = "-o";
	argv[n++] = o->dir;
	argv[n] = NULL;
	struct vp_launch_opts lo = { .who = "viprof serve" };
	if ((e = vp_child__launch(&r->child, (char *const *)argv, &lo)) < 0) {
		vp_set_err(err, errlen, "cannot start the recorder (%s record): %s", o->viprof, strerror(-e));
		free(r);
		errno = -e;
		return NULL;
	}
	int exec_errno = 0;
	if ((e = vp_child__release(&r->child, &exec_errno)) < 0 || exec_errno) {
		e = e < 0 ? e : -exec_errno;
		vp_set_err(err, errlen, "cannot run %s record: %s", o->viprof, strerror(-e));
		vp_svc_rec__free(r);
		errno = -e;
		return NULL;
	}
	return r;
}

static void reap(struct vp_svc_rec *r, bool block)
{
	struct rusage ru;
	int status;
	if (r->done || r->child.pid <= 0)
		return;
	pid_t p = wait4(r->child.pid, &status, block ? 0 : WNOHANG, &ru);
	if (p == r->child.pid) {
		r->done = true;
		r->status = status;
		r->cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
			    (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
	} else if (p < 0 && errno == ECHILD) {
		r->done = true;
		r->status = 1 << 8;
	}
}

int vp_svc_rec__poll(struct vp_svc_rec *r, int timeout_ms)
{
	for (int waited = 0;; waited += 50) {
		reap(r, false);
		if (r->done)
			return WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0 ? 0 : -EIO;
		if (waited >= timeout_ms)
			return 1;
		usleep(50000);
	}
}

int vp_svc_rec__stop(struct vp_svc_rec *r, char *err, size_t errlen)
{
	reap(r, false);
	if (!r->done) {
		r->cpu_ns = proc_cpu_ns(r->child.pid);
		/* SIGINT is record's clean end: drain, END, meta.json. */
		kill(r->child.pid, SIGINT);
		for (int i = 0; i < 200 && !r->done; i++) {
			usleep(50000);
			reap(r, false);
		}
		if (!r->done) {
			/* Ten seconds without finishing: what was flushed stays readable. */
			kill(r->child.pid, SIGKILL);
			reap(r, true);
		}
	}
	if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0)
		return 0;
	vp_set_err(err, errlen, "the recorder for %s %s %d; its messages are in the service's log", r->dir,
		   WIFSIGNALED(r->status) ? "was killed by signal" : "exited with status",
		   WIFSIGNALED(r->status) ? WTERMSIG(r->status) : WEXITSTATUS(r->status));
	return -EIO;
}

uint64_t vp_svc_rec__cpu_ns(const struct vp_svc_rec *r)
{
	return r->done ? r->cpu_ns : proc_cpu_ns(r->child.pid);
}

void vp_svc_rec__free(struct vp_svc_rec *r)
{
	if (!r)
		return;
	if (!r->done && r->child.pid > 0)
		vp_svc_rec__stop(r, NULL, 0);
	vp_child__close(&r->child);
	free(r);
}
