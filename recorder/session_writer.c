/* The recorder's session directory writer: see session_writer.h. */
#define _GNU_SOURCE
#include "recorder/session_writer.h"
#include "common/json.h"
#include "common/safefs.h"
#include "common/steal_est.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "recorder/kallsyms.h"
#include "common/util.h"

/* Kernel text lives in the top half of the address space on every 64-bit Linux
 * architecture we sample; PERF_CONTEXT_* markers sit at the very top and are not IPs. */
#define KERNEL_START 0xffff800000000000ull
#define MAX_STEAL_CPUS 1024

struct meta_pair {
	char *key, *value;
};

#define KS_SEEN 4096   /* a power of two */

struct vp_session_writer {
	char dir[PATH_MAX];
	int dirfd, jitfd;        /* the session directory and its jit/, opened once */
	int parentfd;            /* the directory holding it, and its name there */
	char base[NAME_MAX + 1];
	bool made;               /* we created the session directory (not an empty one given) */
	bool made_jit;           /* we created jit/ in it */
	/* Streamed (the service recording for a user): no directory at all. The stream
	 * and meta.json go into pipes whose other ends the user's own client holds; it
	 * stores them in its session as that user, so root writes nothing of theirs. */
	bool streamed;
	int meta_fd;
	uint64_t meta_bytes;
	uid_t admitted[64];      /* users of attached JVMs let into jit/ */
	int nadmitted;
	struct cfile_writer *cw;
	struct vp_kallsyms *ks;
	/* Kernel addresses of samples seen while the symbols were deferred. */
	bool ks_deferred;
	uint64_t *ks_pending;
	size_t ks_npending, ks_pending_cap;
	uint64_t ks_pending_dropped, last_time;
	/* Kernel addresses whose symbol is already in the stream (or that have none),
	 * direct-mapped: a sample's kernel frames are mostly the same few hundred
	 * addresses, and each one missed here costs a binary search of 200 thousand
	 * symbols (the recorder's hottest function on a JVM service). Empty while ks is
	 * NULL; emptied when it changes. */
	uint64_t ks_seen[KS_SEEN];
	struct meta_pair *meta;
	int nmeta;
	size_t meta_cap;
	char event_names[VP_MAX_EVENTS][64];
	int nevents;
	uint64_t samples, ksyms_emitted, records_seen;
	uint64_t samples_written;   /* samples in chunks that reached the file */
	uint64_t last_flush;
	uint64_t final_bytes;  /* of stream.vps once closed */
	uint64_t *steal_first, *steal_last;
	int steal_ncpus;
	bool have_steal;
	struct switch_buf *sw;  /* MAX_STEAL_CPUS entries, allocated on the first SWITCH */
	int error;        /* sticky -errno */
};

/* Context switches of one vCPU since the last steal snapshot. They only serve steal
 * attribution, so they reach the stream only for intervals in which that vCPU's steal
 * grew: on a busy VM switches outnumber samples several times, and most intervals
 * have no steal at all. Whoever ran at the start of a kept interval is written as a
 * switch from that thread to itself, so the reader knows without the dropped ones. */
struct switch_buf {
	struct vp_switch *v;
	uint64_t *t;
	size_t n, cap, tcap;
	bool have_cur;
	uint32_t cur_pid, cur_tid;
	uint64_t interval_start;
};

/* Is the directory fd empty? (read through a descriptor of its own) */
static bool dir_is_empty(int dirfd)
{
	DIR *d = vp_dir__stream(dirfd);
	if (!d)
		return false;
	struct dirent *e;
	bool empty = true;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = false;
			break;
		}
	}
	closedir(d);
	return empty;
}

/* Splits dir into its parent and its last component (trailing slashes dropped). */
static int split_path(const char *dir, char *parent, size_t plen, char *base, size_t blen)
{
	char buf[PATH_MAX];
	if (!dir[0] || snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	char *slash = strrchr(buf, '/');
	const char *b = slash ? slash + 1 : buf;
	if (!*b || !strcmp(b, ".") || !strcmp(b, "..") || strlen(b) >= blen)
		return -EINVAL;
	snprintf(base, blen, "%s", b);
	if (!slash)
		snprintf(parent, plen, ".");
	else if (slash == buf)
		snprintf(parent, plen, "/");
	else {
		*slash = '\0';
		snprintf(parent, plen, "%s", buf);
	}
	return 0;
}

/* Opens the session directory dir for writing: an empty directory of ours is used, a
 * missing one is made (0700), a non-empty one is refused unless force, which renames it
 * to dir.old (replacing an older dir.old of ours), as perf does with perf.data.old.
 * Everything is done relative to the parent directory, opened once: root must not
 * write where another user can point it, so an entry that is not ours (a directory, a
 * symlink, anything) is refused, and a symlink on the way is followed only if root or
 * we made it (VP_SAFE_TRUSTED_LINKS). Sets w->dirfd, w->parentfd, w->base, w->made. */
static int open_session_dir(struct vp_session_writer *w, const char *dir, bool force, char *err, size_t errlen)
{
	char parent[PATH_MAX], old[NAME_MAX + 8];
	struct stat st;
	int e;

	if ((e = split_path(dir, parent, sizeof(parent), w->base, sizeof(w->base)))) {
		vp_set_err(err, errlen, "%s is not a usable session directory name; give -o a path such as /var/tmp/run1", dir);
		return e;
	}
	w->parentfd = vp_safe_opendir(parent, VP_SAFE_TRUSTED_LINKS);
	if (w->parentfd < 0) {
		e = w->parentfd;
		vp_set_err(err, errlen, "cannot open %s: %s%s", parent, strerror(-e),
			   e == -ELOOP ? " (a symlink on the way that another user could have made: "
					 "give -o a path without it)" : "");
		return e;
	}
	/* The directory's name as the kernel knows what we opened, for messages and for
	 * the agent's dir= option. */
	char fdpath[64], real[PATH_MAX];
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", w->parentfd);
	ssize_t n = readlink(fdpath, real, sizeof(real) - 1);
	if (n <= 0 || real[0] != '/') {
		e = n < 0 ? -errno : -ENOENT;
		vp_set_err(err, errlen, "cannot name the directory %s: %s", parent, strerror(-e));
		return e;
	}
	real[n] = '\0';
	if (snprintf(w->dir, sizeof(w->dir), "%s/%s", strcmp(real, "/") ? real : "", w->base) >= (int)sizeof(w->dir)) {
		vp_set_err(err, errlen, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}

	if (fstatat(w->parentfd, w->base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* Root must not write into, or move, what someone else controls: they could
		 * swap what is in it for links while we write. */
		if (st.st_uid != geteuid()) {
			vp_set_err(err, errlen, "%s belongs to uid %u, not to the user recording (uid %u); "
				   "give -o a new path or a directory you own", w->dir, (unsigned)st.st_uid,
				   (unsigned)geteuid());
			return -EPERM;
		}
		if (S_ISDIR(st.st_mode)) {
			w->dirfd = openat(w->parentfd, w->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (w->dirfd >= 0 && dir_is_empty(w->dirfd))
				goto opened;
			if (w->dirfd >= 0)
				close(w->dirfd);
			w->dirfd = -1;
		}
		if (!force) {
			vp_set_err(err, errlen, "%s already exists and is not empty; use --force (the old one is kept as %s.old) or -o another directory",
				   w->dir, w->dir);
			return -EEXIST;
		}
		snprintf(old, sizeof(old), "%s.old", w->base);
		if ((e = vp_safe_remove_tree(w->parentfd, old))) {
			vp_set_err(err, errlen, "cannot remove the previous %s.old: %s%s", w->dir, strerror(-e),
				   e == -EPERM ? " (it is not yours: remove it, or -o another directory)" : "");
			return e;
		}
		if (renameat(w->parentfd, w->base, w->parentfd, old) != 0) {
			e = -errno;
			vp_set_err(err, errlen, "cannot rename %s to %s.old: %s", w->dir, w->dir, strerror(-e));
			return e;
		}
	}
	if (mkdirat(w->parentfd, w->base, 0700) != 0) {
		e = -errno;
		vp_set_err(err, errlen, "cannot create session directory %s: %s", w->dir, strerror(-e));
		return e;
	}
	w->made = true;
	w->dirfd = openat(w->parentfd, w->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
opened:
	/* Still ours: between mkdirat and openat another user with write access to the
	 * parent could have put their own directory (or a link) at the name. */
	if (w->dirfd < 0 || fstat(w->dirfd, &st) || st.st_uid != geteuid()) {
		e = w->dirfd < 0 ? -errno : -EPERM;
		vp_set_err(err, errlen, "cannot open session directory %s safely: %s; is another user changing %s?",
			   w->dir, strerror(-e), parent);
		return e;
	}
	return 0;
}

/* Everything after the directory is open: jit/, the stream. */
static struct vp_session_writer *finish_create(struct vp_session_writer *w, size_t chunk_bytes,
					       char *err, size_t errlen)
{
	int e;
	/* From here on, everything is relative to the directory as opened now: whatever
	 * happens to the path later, we write into this directory, which we own. Sessions
	 * hold kernel addresses that kptr_restrict hides from users: directories 0700,
	 * files 0600. An attached JVM of another user is let in later, by
	 * vp_session_writer__admit(), as far as its own maps directory and no further. */
	if (fchmod(w->dirfd, 0700)) {
		e = -errno;
		vp_set_err(err, errlen, "cannot make %s private: %s", w->dir, strerror(errno));
		goto fail;
	}
	/* jit/ is made here, never taken: an entry that is already there (whatever a
	 * stale listing said) is not ours to write into. */
	if (mkdirat(w->dirfd, VP_SESSION_JIT_DIR, 0700) != 0) {
		e = -errno;
		vp_set_err(err, errlen, "cannot create %s/%s: %s", w->dir, VP_SESSION_JIT_DIR,
			   e == -EEXIST ? "it exists already (the directory was not empty)" : strerror(-e));
		goto fail;
	}
	w->made_jit = true;
	w->jitfd = openat(w->dirfd, VP_SESSION_JIT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->jitfd < 0) {
		e = -errno;
		vp_set_err(err, errlen, "cannot open %s/%s: %s", w->dir, VP_SESSION_JIT_DIR, strerror(-e));
		goto fail;
	}
	w->cw = cfile_writer__create_at(w->dirfd, VP_SESSION_STREAM, VP_KIND_SESSION_STREAM,
					VP_SESSION_FORMAT_VERSION, chunk_bytes, true);
	if (!w->cw) {
		e = -errno;
		vp_set_err(err, errlen, "cannot create %s/" VP_SESSION_STREAM ": %s", w->dir, strerror(-e));
		goto fail;
	}
	/* Held until the stream is closed: a report of the session meanwhile knows the
	 * recording is in progress (not killed). */
	flock(cfile_writer__fd(w->cw), LOCK_EX | LOCK_NB);
	return w;
fail:
	vp_session_writer__discard(w);
	errno = -e;
	return NULL;
}

static struct vp_session_writer *writer_new(char *err, size_t errlen)
{
	struct vp_session_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		vp_set_err(err, errlen, "out of memory");
		return NULL;
	}
	w->dirfd = w->jitfd = w->parentfd = w->meta_fd = -1;
	return w;
}

struct vp_session_writer *vp_session_writer__create(const char *dir, bool force, size_t chunk_bytes,
						    char *err, size_t errlen)
{
	struct vp_session_writer *w = writer_new(err, errlen);
	int e;
	if (!w)
		return NULL;
	if ((e = open_session_dir(w, dir, force, err, errlen))) {
		vp_session_writer__discard(w);
		errno = -e;
		return NULL;
	}
	return finish_create(w, chunk_bytes, err, errlen);
}

struct vp_session_writer *vp_session_writer__create_at(int dirfd, const char *name, size_t chunk_bytes,
						       char *err, size_t errlen)
{
	struct vp_session_writer *w = writer_new(err, errlen);
	struct stat st;
	int e;
	if (!w)
		return NULL;
	snprintf(w->dir, sizeof(w->dir), "%s", name);
	/* Our own descriptor of the directory itself ("." of an O_PATH fd), readable, so
	 * that it can be listed; never a path. */
	w->dirfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dirfd < 0 || fstat(w->dirfd, &st)) {
		e = -errno;
		vp_set_err(err, errlen, "cannot open the session directory %s: %s", name, strerror(-e));
		goto fail;
	}
	if (st.st_uid != geteuid() || !dir_is_empty(w->dirfd)) {
		/* Not ours, or not empty: discard() must not touch what is there. */
		close(w->dirfd);
		w->dirfd = -1;
		e = st.st_uid != geteuid() ? -EPERM : -EEXIST;
		vp_set_err(err, errlen, e == -EPERM ? "%s belongs to uid %u, not to us; give a directory of ours"
						    : "%s is not empty; give an empty or a new directory", name, (unsigned)st.st_uid);
		goto fail;
	}
	return finish_create(w, chunk_bytes, err, errlen);
fail:
	vp_session_writer__discard(w);
	errno = -e;
	return NULL;
}

struct vp_session_writer *vp_session_writer__create_stream(int stream_fd, int meta_fd, const char *name,
							   size_t chunk_bytes, char *err, size_t errlen)
{
	struct vp_session_writer *w = writer_new(err, errlen);
	if (!w) {
		close(stream_fd);
		close(meta_fd);
		errno = ENOMEM;
		return NULL;
	}
	snprintf(w->dir, sizeof(w->dir), "%s", name);
	w->streamed = true;
	w->meta_fd = meta_fd;
	w->cw = cfile_writer__create_fd(stream_fd, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, chunk_bytes);
	if (!w->cw) {
		int e = errno;
		vp_set_err(err, errlen, "cannot start the session stream of %s: %s", name, strerror(e));
		vp_session_writer__free(w);
		errno = e;
		return NULL;
	}
	return w;
}

int vp_session_writer__admit(struct vp_session_writer *w, uid_t uid, gid_t gid, pid_t pid)
{
	char name[32];
	bool made;
	int e, fd;

	if (w->streamed)
		return -ENOTSUP;   /* the client, as the JVM's own user, makes its maps directory */
	snprintf(name, sizeof(name), "%d", (int)pid);
	if (uid != geteuid()) {
		/* Search permission for exactly this user on the session and on jit/ (a
		 * POSIX ACL, listing nothing), so that the JVM reaches jit/<pid>. */
		bool known = false;
		for (int i = 0; i < w->nadmitted; i++)
			known |= w->admitted[i] == uid;
		if (!known && w->nadmitted < (int)(sizeof(w->admitted) / sizeof(w->admitted[0])))
			w->admitted[w->nadmitted++] = uid;
		else if (!known)
			return -E2BIG;
		if ((e = vp_safe_grant_search(w->dirfd, w->admitted, w->nadmitted)) ||
		    (e = vp_safe_grant_search(w->jitfd, w->admitted, w->nadmitted))) {
			if (e != -EOPNOTSUPP)
				return e;
			/* No ACLs on this file system: traversable by all (0711), listable by
			 * none; the files stay 0600 and jit/<pid> the JVM user's own. */
			if (fchmod(w->dirfd, 0711) || fchmod(w->jitfd, 0711))
				return -errno;
			e = 0;
		}
	}
	/* The JVM's own maps directory: made by us inside our jit/ (nobody else can
	 * create there), then given to the JVM's user, 0700. */
	fd = vp_safe_mkdirat(w->jitfd, name, 0700, (uid_t)-1, &made);
	if (fd < 0)
		return fd;
	e = made && (uid != geteuid() || gid != getegid()) && fchown(fd, uid, gid) ? -errno : 0;
	close(fd);
	return e;
}

uint64_t vp_session_writer__disk_bytes(const struct vp_session_writer *w)
{
	if (w->streamed)
		return vp_session_writer__bytes(w) + w->meta_bytes;
	return w->dirfd >= 0 ? vp_safe_tree_bytes(w->dirfd) : 0;
}

void vp_session_writer__discard(struct vp_session_writer *w)
{
	struct stat a, b;

	if (!w)
		return;
	/* The stream first, so that nothing is written after its directory entry goes. */
	cfile_writer__close(w->cw);
	w->cw = NULL;
	if (w->dirfd >= 0 && w->made) {
		/* A directory we made in this run holds only what we and the JVMs we let in
		 * wrote: it goes, but only if its name still names it. */
		vp_safe_empty_dir(w->dirfd);
		if (w->parentfd >= 0 && fstat(w->dirfd, &a) == 0 &&
		    fstatat(w->parentfd, w->base, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			unlinkat(w->parentfd, w->base, AT_REMOVEDIR);
	} else if (w->dirfd >= 0) {
		/* A directory we were given: only the entries we created go; nothing that
		 * was there before is emptied. */
		unlinkat(w->dirfd, VP_SESSION_STREAM, 0);
		unlinkat(w->dirfd, VP_SESSION_META_JSON ".tmp", 0);
		if (w->made_jit)
			vp_safe_remove_tree(w->dirfd, VP_SESSION_JIT_DIR);
	}
	vp_session_writer__free(w);
}

static int emit_ksym_ips(struct vp_session_writer *w, uint64_t time, const uint64_t *ips, size_t n);

void vp_session_writer__defer_ksyms(struct vp_session_writer *w)
{
	w->ks_deferred = true;
}

void vp_session_writer__set_ksyms(struct vp_session_writer *w, struct vp_kallsyms *ks)
{
	vp_kallsyms__free(w->ks);
	w->ks = ks;
	memset(w->ks_seen, 0, sizeof(w->ks_seen));
	if (w->ks_deferred) {
		w->ks_deferred = false;
		if (ks && w->ks_npending)
			emit_ksym_ips(w, w->last_time, w->ks_pending, w->ks_npending);
		free(w->ks_pending);
		w->ks_pending = NULL;
		w->ks_npending = w->ks_pending_cap = 0;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The bound on kept addresses while symbols are deferred: 8 MiB. The loader takes
 * about 0.1 s, so a recording reaches it only with very deep kernel stacks at a very
 * high rate; past it, duplicates are squeezed out, then new addresses stay unnamed. */
#define MAX_PENDING_KSYMS (1u << 20)

static void keep_kernel_ips(struct vp_session_writer *w, const struct vp_sample *s)
{
	for (unsigned i = 0; i < s->nr_kernel; i++) {
		if (w->ks_npending == MAX_PENDING_KSYMS) {
			size_t n = 0;

			vp_sort(w->ks_pending, w->ks_npending, sizeof(uint64_t), cmp_u64);
			for (size_t j = 0; j < w->ks_npending; j++)
				if (!n || w->ks_pending[n - 1] != w->ks_pending[j])
					w->ks_pending[n++] = w->ks_pending[j];
			w->ks_npending = n;
		}
		if (w->ks_npending == MAX_PENDING_KSYMS ||
		    vp_grow((void **)&w->ks_pending, &w->ks_pending_cap, w->ks_npending + 1, sizeof(uint64_t))) {
			w->ks_pending_dropped += s->nr_kernel - i;
			return;
		}
		w->ks_pending[w->ks_npending++] = s->ips[i];
	}
}

const char *vp_session_writer__dir(const struct vp_session_writer *w) { return w->dir; }

static int append(struct vp_session_writer *w, uint32_t type, uint64_t time, const void *body, size_t len)
{
	if (w->error)
		return w->error;
	int e = cfile_writer__append(w->cw, type, time, body, len);
	if (e)
		w->error = e;
	return e;
}

int vp_session_writer__meta(struct vp_session_writer *w, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value);
	char *body = malloc(kl + vl + 2);
	if (!body)
		return -ENOMEM;
	memcpy(body, key, kl + 1);
	memcpy(body + kl + 1, value, vl + 1);
	int e = append(w, VP_REC_META, 0, body, kl + vl + 2);
	free(body);
	if (e)
		return e;
	if (vp_grow((void **)&w->meta, &w->meta_cap, (size_t)w->nmeta + 1, sizeof(*w->meta)))
		return -ENOMEM;
	w->meta[w->nmeta].key = strdup(key);
	w->meta[w->nmeta].value = strdup(value);
	if (!w->meta[w->nmeta].key || !w->meta[w->nmeta].value) {
		free(w->meta[w->nmeta].key);
		free(w->meta[w->nmeta].value);
		return -ENOMEM;
	}
	w->nmeta++;
	return 0;
}

int vp_session_writer__event(struct vp_session_writer *w, const struct sampler_event *ev)
{
	if (w->nevents >= VP_MAX_EVENTS)
		return -E2BIG;
	struct vp_event_desc d = {
		.index = (uint32_t)w->nevents,
		.perf_type = ev->type,
		.perf_config = ev->config,
		.period = ev->period,
		.freq = ev->freq,
	};
	if (ev->software)
		d.flags |= VP_EVENT_SOFTWARE;
	/* The clock events count nanoseconds, so their period is a time. */
	if (ev->type == PERF_TYPE_SOFTWARE &&
	    (ev->config == PERF_COUNT_SW_CPU_CLOCK || ev->config == PERF_COUNT_SW_TASK_CLOCK))
		d.flags |= VP_EVENT_TIME_UNITS;
	if (ev->exclude_kernel)
		d.flags |= VP_EVENT_USER_ONLY;
	snprintf(d.name, sizeof(d.name), "%s", ev->name);
	snprintf(w->event_names[w->nevents], sizeof(w->event_names[0]), "%s", ev->name);
	w->nevents++;
	return append(w, VP_REC_EVENT, 0, &d, sizeof(d));
}

int vp_session_writer__estimate_event(struct vp_session_writer *w, uint32_t index)
{
	struct vp_event_desc d = { .index = index, .perf_type = UINT32_MAX,
				   .flags = VP_EVENT_SCHED | VP_EVENT_TIME_UNITS | VP_EVENT_ESTIMATE };

	snprintf(d.name, sizeof(d.name), "%s", VP_STEAL_EST_EVENT);
	return append(w, VP_REC_EVENT, 0, &d, sizeof(d));
}

/* Emits a KSYM record for each kernel frame whose symbol is new to this session. It
 * runs for every sample, so it is a binary search and a bitmap test per frame. */
static int emit_ksyms(struct vp_session_writer *w, uint64_t time, const struct vp_sample *s)
{
	return emit_ksym_ips(w, time, s->ips, s->nr_kernel);
}

static int emit_ksym_ips(struct vp_session_writer *w, uint64_t time, const uint64_t *ips, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t ip = ips[i];
		if (ip < KERNEL_START || ip >= (uint64_t)-4095)
			continue;
		uint64_t *seen = &w->ks_seen[((ip >> 2) ^ (ip >> 14)) & (KS_SEEN - 1)];
		if (*seen == ip)
			continue;
		*seen = ip;
		long idx = vp_kallsyms__find(w->ks, ip);
		if (idx < 0 || !vp_kallsyms__mark(w->ks, idx))
			continue;
		struct vp_kallsym_info ki;
		vp_kallsyms__info(w->ks, idx, &ki);
		size_t nl = strlen(ki.name);
		struct vp_ksym *k = cfile_writer__reserve(w->cw, VP_REC_KSYM, time, sizeof(*k) + nl + 1);
		if (!k)
			return w->error = -errno;
		k->addr = ki.addr;
		k->size = ki.size;
		snprintf(k->module, sizeof(k->module), "%s", ki.module);
		memcpy(k->name, ki.name, nl + 1);
		w->ksyms_emitted++;
	}
	return 0;
}

#define MAX_BUFFERED_SWITCHES (1u << 16)
static int settle_switches(struct vp_session_writer *w, int cpu, bool keep, uint64_t now);

static int buffer_switch(struct vp_session_writer *w, uint64_t time, const struct vp_switch *sw)
{
	if (!w->sw && !(w->sw = calloc(MAX_STEAL_CPUS, sizeof(*w->sw))))
		return w->error = -ENOMEM;
	struct switch_buf *b = &w->sw[sw->cpu];
	/* Without steal snapshots (no /proc/stat steal column) nothing would ever settle
	 * the buffer: bound it, dropping what no snapshot can use. */
	if (b->n >= MAX_BUFFERED_SWITCHES) {
		int e = settle_switches(w, (int)sw->cpu, false, time);
		if (e)
			return e;
	}
	if (vp_grow((void **)&b->v, &b->cap, b->n + 1, sizeof(*b->v)) ||
	    vp_grow((void **)&b->t, &b->tcap, b->n + 1, sizeof(*b->t)))
		return w->error = -ENOMEM;
	b->v[b->n] = *sw;
	b->t[b->n++] = time;
	return 0;
}

/* At a steal snapshot: writes a vCPU's buffered switches if its steal grew since the
 * last snapshot, else drops them; either way remembers who runs there now. */
static int settle_switches(struct vp_session_writer *w, int cpu, bool keep, uint64_t now)
{
	struct switch_buf *b = w->sw ? &w->sw[cpu] : NULL;
	if (!b)
		return 0;
	if (keep && b->have_cur) {
		/* Before the interval's first record, so that a switch that arrived late
		 * (it happened between the last drain and the last snapshot) still wins. */
		uint64_t t = b->interval_start;
		for (size_t i = 0; i < b->n; i++)
			if (b->t[i] <= t)
				t = b->t[i] ? b->t[i] - 1 : 0;
		struct vp_switch self = { .cpu = (uint32_t)cpu, .prev_pid = b->cur_pid, .prev_tid = b->cur_tid,
					  .next_pid = b->cur_pid, .next_tid = b->cur_tid };
		int e = append(w, VP_REC_SWITCH, t, &self, sizeof(self));
		if (e)
			return e;
	}
	for (size_t i = 0; i < b->n; i++) {
		if (keep) {
			int e = append(w, VP_REC_SWITCH, b->t[i], &b->v[i], sizeof(b->v[i]));
			if (e)
				return e;
		}
		/* Buffers are in drain order, which is time order within one vCPU's ring. */
		b->cur_pid = b->v[i].next_pid;
		b->cur_tid = b->v[i].next_tid;
		b->have_cur = true;
	}
	b->n = 0;
	b->interval_start = now;
	return 0;
}

int vp_session_writer__emit(struct vp_session_writer *w, uint32_t type, uint64_t time,
			    const void *body, size_t len)
{
	if (w->error)
		return w->error;
	if (type == VP_REC_SAMPLE) {
		const struct vp_sample *s = body;
		if (len < sizeof(*s) ||
		    len < sizeof(*s) + ((size_t)s->nr_kernel + s->nr_user) * sizeof(uint64_t))
			return -EINVAL;   /* a sampler bug; refuse rather than write garbage */
		if (w->ks && s->nr_kernel) {
			int e = emit_ksyms(w, time, s);
			if (e)
				return e;
		} else if (w->ks_deferred && s->nr_kernel) {
			keep_kernel_ips(w, s);
		}
		if (time > w->last_time)
			w->last_time = time;
		w->samples++;
	}
	if (type == VP_REC_SWITCH && len >= sizeof(struct vp_switch) &&
	    ((const struct vp_switch *)body)->cpu < MAX_STEAL_CPUS)
		return buffer_switch(w, time, body);
	return append(w, type, time, body, len);
}

static int sink_emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	return vp_session_writer__emit(ctx, type, time, body, len);
}

struct vp_sink vp_session_writer__sink(struct vp_session_writer *w)
{
	return (struct vp_sink){ .emit = sink_emit, .ctx = w };
}

int vp_session_writer__steal(struct vp_session_writer *w, uint64_t time, const uint64_t *steal_ns, int ncpus)
{
	if (ncpus > MAX_STEAL_CPUS)
		ncpus = MAX_STEAL_CPUS;
	if (!w->have_steal) {
		w->steal_first = calloc((size_t)ncpus + 1, sizeof(uint64_t));
		w->steal_last = calloc((size_t)ncpus + 1, sizeof(uint64_t));
		if (!w->steal_first || !w->steal_last)
			return -ENOMEM;
		memcpy(w->steal_first, steal_ns, (size_t)ncpus * sizeof(uint64_t));
		memcpy(w->steal_last, steal_ns, (size_t)ncpus * sizeof(uint64_t));
		w->steal_ncpus = ncpus;
		w->have_steal = true;
	}
	for (int c = 0; c < ncpus; c++) {
		struct vp_steal st = { .cpu = (uint32_t)c, .steal_ns = steal_ns[c] };
		bool grew = c < w->steal_ncpus && steal_ns[c] > w->steal_last[c];
		int e = settle_switches(w, c, grew, time);
		if (!e)
			e = append(w, VP_REC_STEAL, time, &st, sizeof(st));
		if (e)
			return e;
		if (c < w->steal_ncpus)
			w->steal_last[c] = steal_ns[c];
	}
	return 0;
}

int vp_session_writer__flush(struct vp_session_writer *w)
{
	if (w->error)
		return w->error;
	int e = cfile_writer__flush(w->cw);
	if (e)
		w->error = e;
	else
		w->samples_written = w->samples;
	return e;
}

int vp_session_writer__maybe_flush(struct vp_session_writer *w, uint64_t now, uint64_t interval_ns)
{
	if (now - w->last_flush < interval_ns)
		return 0;
	w->last_flush = now;
	return vp_session_writer__flush(w);
}

uint64_t vp_session_writer__samples(const struct vp_session_writer *w) { return w->samples; }
uint64_t vp_session_writer__samples_written(const struct vp_session_writer *w) { return w->samples_written; }
uint64_t vp_session_writer__ksyms_emitted(const struct vp_session_writer *w) { return w->ksyms_emitted; }
uint64_t vp_session_writer__bytes(const struct vp_session_writer *w)
{
	return w->cw ? cfile_writer__bytes(w->cw) : w->final_bytes;
}
int vp_session_writer__error(const struct vp_session_writer *w) { return w->error; }

static void json_u64_array(FILE *f, const uint64_t *v, int n)
{
	fputc('[', f);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)v[i]);
	fputc(']', f);
}

/* meta.json's text (malloc'ed, *len bytes), or NULL. */
static char *meta_json_text(const struct vp_session_writer *w, const struct vp_end *end, uint64_t stream_bytes,
			    size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		return NULL;
	fprintf(f, "{\n  \"format_version\": %d,\n  \"meta\": {", VP_SESSION_FORMAT_VERSION);
	for (int i = 0; i < w->nmeta; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		vp_json_fputs(f, w->meta[i].key, 0);
		fputs(": ", f);
		vp_json_fputs(f, w->meta[i].value, 0);
	}
	fputs("\n  },\n  \"events\": [", f);
	for (int i = 0; i < w->nevents; i++) {
		fputs(i ? ", " : "", f);
		vp_json_fputs(f, w->event_names[i], 0);
	}
	fprintf(f, "],\n  \"samples\": %llu,\n  \"lost\": %llu,\n  \"duration_s\": %.3f,\n"
		   "  \"exit_status\": %u,\n  \"kernel_symbols\": %llu,\n  \"stream_bytes\": %llu,\n",
		(unsigned long long)end->samples, (unsigned long long)end->lost,
		(double)end->duration_ns / 1e9, end->exit_status,
		(unsigned long long)w->ksyms_emitted, (unsigned long long)stream_bytes);
	fputs("  \"steal_ns_start\": ", f);
	json_u64_array(f, w->steal_first, w->have_steal ? w->steal_ncpus : 0);
	fputs(",\n  \"steal_ns_end\": ", f);
	json_u64_array(f, w->steal_last, w->have_steal ? w->steal_ncpus : 0);
	fputs("\n}\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int write_meta_json(struct vp_session_writer *w, const struct vp_end *end, uint64_t stream_bytes,
			   char *err, size_t errlen)
{
	char tmp[PATH_MAX + 40];
	const char *tname = VP_SESSION_META_JSON ".tmp";
	size_t len = 0;
	char *text = meta_json_text(w, end, stream_bytes, &len);
	int e = 0;

	snprintf(tmp, sizeof(tmp), "%s/%s", w->dir, w->streamed ? VP_SESSION_META_JSON : tname);
	if (!text) {
		vp_set_err(err, errlen, "cannot write %s: out of memory", tmp);
		return -ENOMEM;
	}
	if (w->streamed) {
		/* To the client, which stores it as the user. */
		e = vp_write_all(w->meta_fd, text, len);
		close(w->meta_fd);
		w->meta_fd = -1;
		w->meta_bytes = e ? 0 : len;
		if (e)
			vp_set_err(err, errlen, "cannot pass %s to the client: %s", tmp, strerror(-e));
		free(text);
		return e;
	}
	/* A new file in our own directory, never one that is there already. */
	unlinkat(w->dirfd, tname, 0);
	int fd = vp_safe_create(w->dirfd, tname, 0600);
	if (fd < 0 || (e = vp_write_all(fd, text, len))) {
		e = fd < 0 ? fd : e;
		if (fd >= 0) {
			close(fd);
			unlinkat(w->dirfd, tname, 0);
		}
		free(text);
		vp_set_err(err, errlen, "cannot write %s: %s", tmp, strerror(-e));
		return e;
	}
	close(fd);
	free(text);
	if (renameat(w->dirfd, tname, w->dirfd, VP_SESSION_META_JSON) != 0) {
		e = errno;
		vp_set_err(err, errlen, "cannot rename %s: %s", tmp, strerror(e));
		return -e;
	}
	return 0;
}

int vp_session_writer__finish(struct vp_session_writer *w, uint64_t time, struct vp_end *end,
			      char *err, size_t errlen)
{
	end->samples = w->samples;
	int e = append(w, VP_REC_END, time, end, sizeof(*end));
	if (!e)
		e = cfile_writer__flush(w->cw);
	if (!e)
		w->samples_written = w->samples;
	uint64_t sent = cfile_writer__bytes(w->cw);
	int ce = cfile_writer__close(w->cw);
	w->cw = NULL;
	if (!e)
		e = ce;
	if (e) {
		vp_set_err(err, errlen, "cannot write %s/" VP_SESSION_STREAM ": %s", w->dir, strerror(-e));
		return e;
	}
	struct stat st;
	if (w->streamed)
		w->final_bytes = sent;
	else
		w->final_bytes = fstatat(w->dirfd, VP_SESSION_STREAM, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_size : 0;
	return write_meta_json(w, end, w->final_bytes, err, errlen);
}

void vp_session_writer__free(struct vp_session_writer *w)
{
	if (!w)
		return;
	cfile_writer__close(w->cw);
	if (w->jitfd >= 0)
		close(w->jitfd);
	if (w->dirfd >= 0)
		close(w->dirfd);
	if (w->parentfd >= 0)
		close(w->parentfd);
	if (w->meta_fd >= 0)
		close(w->meta_fd);
	vp_kallsyms__free(w->ks);
	free(w->ks_pending);
	for (int i = 0; i < w->nmeta; i++) {
		free(w->meta[i].key);
		free(w->meta[i].value);
	}
	free(w->meta);
	for (int c = 0; w->sw && c < MAX_STEAL_CPUS; c++) {
		free(w->sw[c].v);
		free(w->sw[c].t);
	}
	free(w->sw);
	free(w->steal_first);
	free(w->steal_last);
	free(w);
}
