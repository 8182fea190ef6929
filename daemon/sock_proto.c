/* The socket protocol's messages: see sock_proto.h. */
#define _GNU_SOURCE
#include "daemon/sock_proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"

const char *vp_sock__path(void)
{
	const char *p = getenv(VP_SOCK_ENV);
	return p && *p ? p : VP_SOCK_DEFAULT;
}

struct out {
	char *buf;
	size_t len, off;
	bool full;
};

static void put(struct out *o, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(struct out *o, const char *key, const char *fmt, ...)
{
	va_list ap;
	size_t start = o->off;
	int n = snprintf(o->buf + o->off, o->len - o->off, "%s=", key);
	if (n < 0 || (size_t)n >= o->len - o->off) {
		o->full = true;
		return;
	}
	o->off += (size_t)n;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->off, o->len - o->off, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + 1 >= o->len - o->off) {
		o->full = true;
		return;
	}
	/* One line per key: a newline inside a value (an argument) becomes a space. */
	for (size_t i = start; i < o->off + (size_t)n; i++)
		if (o->buf[i] == '\n')
			o->buf[i] = ' ';
	o->off += (size_t)n;
	o->buf[o->off++] = '\n';
	o->buf[o->off] = '\0';
}

int vp_sock__encode_request(const struct vp_record_opts *o, const struct vp_sock_jvm *jvms, int njvms,
			    char *buf, size_t len)
{
	struct out out = { .buf = buf, .len = len };
	char pids[RECORD_MAX_PIDS * 24] = "";
	size_t off = 0;

	int n = snprintf(buf, len, "RECORD\n");
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	out.off = (size_t)n;
	if (o->events)
		put(&out, "events", "%s", o->events);
	put(&out, "freq", "%llu", (unsigned long long)o->freq);
	put(&out, "period", "%llu", (unsigned long long)o->period);
	put(&out, "callchain", "%d", o->callchain);
	put(&out, "fp_walk", "%d", o->fp_walk);
	put(&out, "target", "%s", o->target == RECORD_TARGET_ALL ? "all" : o->target == RECORD_TARGET_PIDS ? "pids" : "launch");
	for (int i = 0; i < o->npids && off < sizeof(pids); i++)
		off += (size_t)snprintf(pids + off, sizeof(pids) - off, "%s%d", i ? "," : "", (int)o->pids[i]);
	if (o->npids)
		put(&out, "pids", "%s", pids);
	if (o->launched)
		put(&out, "launched", "%d", (int)o->launched);
	put(&out, "duration", "%.3f", o->duration);
	put(&out, "no_jit", "%d", o->no_jit);
	put(&out, "off_cpu", "%d", o->off_cpu);
	put(&out, "backend", "%s", o->backend ? o->backend : "auto");
	put(&out, "quiet", "%d", o->quiet);
	if (o->cmd && o->cmd[0])
		put(&out, "cmd", "%s", o->cmd[0]);
	if (o->cmdline)
		put(&out, "cmdline", "%s", o->cmdline);
	put(&out, "output", "%s", o->output ? o->output : "");
	off = 0;
	for (int i = 0; i < njvms && off < sizeof(pids); i++)
		off += (size_t)snprintf(pids + off, sizeof(pids) - off, "%s%d:%u", i ? "," : "", (int)jvms[i].pid,
					(unsigned)jvms[i].flags);
	if (njvms)
		put(&out, "jvms", "%s", pids);
	return out.full || off >= sizeof(pids) ? -ENOSPC : 0;
}

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vp_vset_err(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int flag(const char *v, bool *out)
{
	if (strcmp(v, "0") && strcmp(v, "1"))
		return -EINVAL;
	*out = v[0] == '1';
	return 0;
}

int vp_sock__decode_request(char *buf, struct vp_record_opts *o, char **cmdv, struct vp_sock_jvm *jvms,
			    int *njvms, char *err, size_t errlen)
{
	char *save = NULL, *line, *jvm_list = NULL;
	long long v;

	*njvms = 0;
	vp_record_opts__defaults(o);
	o->target = RECORD_TARGET_NONE;
	cmdv[0] = cmdv[1] = NULL;
	line = strtok_r(buf, "\n", &save);
	if (!line || strcmp(line, "RECORD"))
		return bad(err, errlen, "not a request this service knows (expected RECORD; is the client another viprof version?)");
	while ((line = strtok_r(NULL, "\n", &save))) {
		char *val = strchr(line, '=');
		if (!val)
			return bad(err, errlen, "malformed request line '%.40s'", line);
		*val++ = '\0';
		int e = 0;
		if (!strcmp(line, "events")) {
			o->events = val;
		} else if (!strcmp(line, "freq")) {
			e = (v = vp_parse_num(val, 0, RECORD_MAX_FREQ)) < 0 ? -EINVAL : 0;
			o->freq = (uint64_t)v;
		} else if (!strcmp(line, "period")) {
			e = (v = vp_parse_num(val, 0, 1ll << 62)) < 0 ? -EINVAL : 0;
			o->period = (uint64_t)v;
		} else if (!strcmp(line, "callchain")) {
			e = flag(val, &o->callchain);
		} else if (!strcmp(line, "fp_walk")) {
			e = flag(val, &o->fp_walk);
		} else if (!strcmp(line, "no_jit")) {
			e = flag(val, &o->no_jit);
		} else if (!strcmp(line, "off_cpu")) {
			e = flag(val, &o->off_cpu);
		} else if (!strcmp(line, "quiet")) {
			e = flag(val, &o->quiet);
		} else if (!strcmp(line, "target")) {
			if (!strcmp(val, "all"))
				o->target = RECORD_TARGET_ALL;
			else if (!strcmp(val, "pids"))
				o->target = RECORD_TARGET_PIDS;
			else if (!strcmp(val, "launch"))
				o->target = RECORD_TARGET_LAUNCH;
			else
				e = -EINVAL;
		} else if (!strcmp(line, "pids")) {
			char *s2 = NULL;
			for (char *p = strtok_r(val, ",", &s2); p && !e; p = strtok_r(NULL, ",", &s2)) {
				if (o->npids >= RECORD_MAX_PIDS || (v = vp_parse_num(p, 1, INT32_MAX)) < 0)
					e = -EINVAL;
				else
					o->pids[o->npids++] = (pid_t)v;
			}
		} else if (!strcmp(line, "launched")) {
			e = (v = vp_parse_num(val, 1, INT32_MAX)) < 0 ? -EINVAL : 0;
			o->launched = (pid_t)v;
		} else if (!strcmp(line, "duration")) {
			char *end;
			errno = 0;
			o->duration = strtod(val, &end);
			e = errno || *end || !(o->duration >= 0) ? -EINVAL : 0;
		} else if (!strcmp(line, "backend")) {
			if (strcmp(val, "auto") && strcmp(val, "bpf") && strcmp(val, "perf"))
				e = -EINVAL;
			o->backend = val;
		} else if (!strcmp(line, "cmd")) {
			cmdv[0] = val;
			o->cmd = cmdv;
		} else if (!strcmp(line, "cmdline")) {
			o->cmdline = val;
		} else if (!strcmp(line, "output")) {
			o->output = val;
		} else if (!strcmp(line, "jvms")) {
			jvm_list = val;
		} else {
			return bad(err, errlen, "unknown request key '%.40s'", line);
		}
		if (e)
			return bad(err, errlen, "bad value for %s: '%.60s'", line, val);
	}
	if (o->target == RECORD_TARGET_NONE)
		return bad(err, errlen, "the request names no target");
	if (o->target == RECORD_TARGET_PIDS && !o->npids)
		return bad(err, errlen, "target pids without pids");
	if (o->target == RECORD_TARGET_LAUNCH && !o->launched)
		return bad(err, errlen, "target launch without the launched pid");
	/* After the pids, whatever the order of the lines: each JVM must be one of them. */
	char *s2 = NULL;
	for (char *p = jvm_list ? strtok_r(jvm_list, ",", &s2) : NULL; p; p = strtok_r(NULL, ",", &s2)) {
		char *colon = strchr(p, ':');
		long long pid, flags;
		bool known = false;
		if (!colon || *njvms >= RECORD_MAX_PIDS)
			return bad(err, errlen, "bad value for jvms: '%.60s'", p);
		*colon = '\0';
		if ((pid = vp_parse_num(p, 1, INT32_MAX)) < 0 || (flags = vp_parse_num(colon + 1, 0, 0xff)) < 0)
			return bad(err, errlen, "bad value for jvms: '%.60s'", p);
		for (int i = 0; i < o->npids; i++)
			known |= o->pids[i] == (pid_t)pid;
		if (!known || o->target != RECORD_TARGET_PIDS)
			return bad(err, errlen, "jvms names process %lld, which the request does not record", pid);
		jvms[*njvms].pid = (pid_t)pid;
		jvms[(*njvms)++].flags = (uint32_t)flags;
	}
	return 0;
}

int vp_sock__send(int sock, const char *msg, size_t len, int fd)
{
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(&c, 0, sizeof(c));
		m.msg_control = c.buf;
		m.msg_controllen = sizeof(c.buf);
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &fd, sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
		if (n >= 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

ssize_t vp_sock__recv(int sock, char *buf, size_t len, int *fd)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len - 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} c;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof(c.buf) };
	ssize_t n;

	if (fd)
		*fd = -1;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		int nfd = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < nfd; i++) {
			int f;
			memcpy(&f, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			if (fd && *fd < 0)
				*fd = f;
			else
				close(f);   /* more than we asked for: never kept */
		}
	}
	if (m.msg_flags & MSG_TRUNC)
		return -EMSGSIZE;
	buf[n] = '\0';
	return n;
}
