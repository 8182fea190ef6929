/* Shared by the sampler tests: an in-memory sink and a launched child held until the
 * sampler is running (SAMPLER_TARGET_LAUNCH), as the recorder does it. */
#ifndef VIPROF_TEST_SAMPLER_UTIL_H
#define VIPROF_TEST_SAMPLER_UTIL_H

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include "common/session_format.h"
#include "common/util.h"
#include "sampler-kernel/sampler.h"
#include "test.h"

struct rec {
	uint32_t type;
	uint64_t time;
	size_t len;
	void *body;
};

struct mem_sink {
	struct rec *r;
	size_t n, cap;
	bool keep_stacks;       /* false: store only struct vp_sample of samples (rate test) */
};

static inline int mem_sink__emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct mem_sink *m = ctx;

	if (vp_grow((void **)&m->r, &m->cap, m->n + 1, sizeof(*m->r)))
		return -ENOMEM;
	if (type == VP_REC_SAMPLE && !m->keep_stacks && len > sizeof(struct vp_sample))
		len = sizeof(struct vp_sample);
	m->r[m->n] = (struct rec){ .type = type, .time = time, .len = len, .body = malloc(len ? len : 1) };
	if (!m->r[m->n].body)
		return -ENOMEM;
	memcpy(m->r[m->n].body, body, len);
	m->n++;
	return 0;
}

static inline void mem_sink__clear(struct mem_sink *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->r[i].body);
	free(m->r);
	m->r = NULL;
	m->n = m->cap = 0;
}

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A child blocked on a pipe until launch__go(); then it runs fn(arg) and exits. */
struct launch {
	pid_t pid;
	int go_fd;
};

static inline struct launch launch__hold(int (*fn)(void *), void *arg)
{
	int p[2];
	struct launch l;

	if (pipe(p))
		FAIL("pipe: %s", strerror(errno));
	l.pid = fork();
	if (l.pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (l.pid == 0) {
		char c;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(3);
		close(p[0]);
		_exit(fn(arg));
	}
	close(p[0]);
	l.go_fd = p[1];
	return l;
}

static inline void launch__go(struct launch *l)
{
	if (write(l->go_fd, "g", 1) != 1)
		FAIL("cannot release the child: %s", strerror(errno));
	close(l->go_fd);
}

/* Polls the sampler (and also(ctx) when not NULL) until child pid exits, its wait
 * status in *status; the sampler keeps running. */
static inline void sampler__poll_until_exit(const struct sampler_backend *b, struct sampler *s, pid_t pid,
					    int *status, void (*also)(void *ctx), void *ctx)
{
	for (;;) {
		pid_t w = waitpid(pid, status, WNOHANG);

		if (w == pid)
			return;
		ASSERT_GE(w, 0);
		ASSERT_GE(b->poll(s, 50), 0);
		if (also)
			also(ctx);
	}
}

/* Polls the sampler until the child exits, then stops it. Returns the child's
 * rusage (which includes its waited-for children). */
static inline void launch__run(struct launch *l, const struct sampler_backend *b, struct sampler *s,
			struct rusage *ru, int *status)
{
	for (;;) {
		pid_t w = wait4(l->pid, status, WNOHANG, ru);

		if (w == l->pid)
			break;
		if (w < 0)
			FAIL("wait4: %s", strerror(errno));
		ASSERT_GE(b->poll(s, 100), 0);
	}
	ASSERT_OK(b->stop(s));
}

#endif
