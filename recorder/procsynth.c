/* /proc synthesis of COMM and MMAP records: see procsynth.h. */
#define _GNU_SOURCE
#include "common/util.h"
#include "recorder/procsynth.h"
#include "common/safefs.h"

#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/session_format.h"

struct bid_entry {
	uint32_t maj, min;
	uint64_t ino;
	int8_t size;        /* build-id length, or 0 when the file has none / unreadable */
	uint8_t id[20];
};

struct vp_procsynth {
	struct bid_entry *cache;
	size_t n, cap;
};

struct vp_procsynth *vp_procsynth__new(void)
{
	return calloc(1, sizeof(struct vp_procsynth));
}

void vp_procsynth__free(struct vp_procsynth *ps)
{
	if (!ps)
		return;
	free(ps->cache);
	free(ps);
}

static int elf_build_id_fd(int fd, uint8_t *out, size_t outlen)
{
	int ret = -ENOENT;
	Elf64_Phdr *ph = NULL;
	uint8_t *notes = NULL;
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		ret = -ENOEXEC;
		goto cleanup;
	}
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 256) {
		ret = -ENOEXEC;
		goto cleanup;
	}
	size_t phlen = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
	ph = malloc(phlen);
	if (!ph) {
		ret = -ENOMEM;
		goto cleanup;
	}
	if (pread(fd, ph, phlen, (off_t)eh.e_phoff) != (ssize_t)phlen) {
		ret = -ENOEXEC;
		goto cleanup;
	}
	for (int i = 0; i < eh.e_phnum && ret == -ENOENT; i++) {
		if (ph[i].p_type != PT_NOTE || ph[i].p_filesz == 0 || ph[i].p_filesz > 65536)
			continue;
		free(notes);
		notes = malloc(ph[i].p_filesz);
		if (!notes) {
			ret = -ENOMEM;
			goto cleanup;
		}
		if (pread(fd, notes, ph[i].p_filesz, (off_t)ph[i].p_offset) != (ssize_t)ph[i].p_filesz)
			continue;
		size_t off = 0, len = ph[i].p_filesz;
		size_t align = ph[i].p_align == 8 ? 8 : 4;
		while (off + sizeof(Elf64_Nhdr) <= len) {
			Elf64_Nhdr nh;
			memcpy(&nh, notes + off, sizeof(nh));
			size_t name_off = off + sizeof(nh);
			size_t desc_off = name_off + ((nh.n_namesz + align - 1) & ~(align - 1));
			size_t next = desc_off + ((nh.n_descsz + align - 1) & ~(align - 1));
			if (desc_off > len || nh.n_descsz > len - desc_off)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp(notes + name_off, "GNU", 4) && nh.n_descsz > 0) {
				size_t n = nh.n_descsz < outlen ? nh.n_descsz : outlen;
				memcpy(out, notes + desc_off, n);
				ret = (int)n;
				break;
			}
			if (next <= off)
				break;
			off = next;
		}
	}
cleanup:
	free(ph);
	free(notes);
	return ret;
}

/* Looks for NT_GNU_BUILD_ID in the PT_NOTE segments of an ELF64 little-endian file;
 * only the headers and the notes are read, never the whole file. */
int vp_elf_build_id(const char *path, uint8_t *out, size_t outlen)
{
	/* Never block on a special file a user put at a recorded path. */
	int fd = vp_safe_open_regular(path, false);

	if (fd < 0)
		return fd;
	int ret = elf_build_id_fd(fd, out, outlen);
	close(fd);
	return ret;
}


/* The build-id of a mapped file, once per (device, inode) across all processes. */
static void lookup_build_id(struct vp_procsynth *ps, pid_t pid, struct vp_mmap *m, const char *file)
{
	for (size_t i = 0; i < ps->n; i++) {
		struct bid_entry *b = &ps->cache[i];
		if (b->ino == m->ino && b->maj == m->maj && b->min == m->min) {
			memcpy(m->build_id, b->id, sizeof(b->id));
			m->build_id_size = (uint8_t)b->size;
			return;
		}
	}
	struct bid_entry b = { .maj = m->maj, .min = m->min, .ino = m->ino };
	char path[PATH_MAX + 64];
	struct stat st;
	/* The mapped object itself, through map_files (also inside containers), opened
	 * without blocking, only if it is a regular file on the same device and inode: a
	 * FIFO or another file put at the recorded path is never read. */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)pid, (unsigned long long)m->start,
		 (unsigned long long)(m->start + m->len));
	int fd = vp_safe_open_regular(path, false);
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == m->ino && major(st.st_dev) == m->maj &&
	    minor(st.st_dev) == m->min) {
		int n = elf_build_id_fd(fd, b.id, sizeof(b.id));
		if (n > 0)
			b.size = (int8_t)n;
	}
	if (fd >= 0)
		close(fd);
	if (vp_grow((void **)&ps->cache, &ps->cap, ps->n + 1, sizeof(*ps->cache)))
		goto out;   /* just no cache: the answer is still right */
	ps->cache[ps->n++] = b;
out:
	memcpy(m->build_id, b.id, sizeof(b.id));
	m->build_id_size = (uint8_t)b.size;
}

static int synth_comms(pid_t pid, uint64_t time, const struct vp_sink *sink)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	struct dirent *e;
	int ret = 0, n = 0;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		int tid = atoi(e->d_name);
		char cpath[96], comm[32] = "";
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/comm", (int)pid, tid);
		int fd = open(cpath, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;   /* the thread exited meanwhile */
		ssize_t k = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (k <= 0)
			continue;
		comm[k] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		struct vp_comm c = { .pid = (uint32_t)pid, .tid = (uint32_t)tid };
		snprintf(c.comm, sizeof(c.comm), "%.15s", comm);
		if ((ret = sink->emit(sink->ctx, VP_REC_COMM, time, &c, sizeof(c))))
			break;
		n++;
	}
	closedir(d);
	if (!ret && !n)
		ret = -ESRCH;
	return ret;
}

static int synth_maps(struct vp_procsynth *ps, pid_t pid, uint64_t time, const struct vp_sink *sink)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	return vp_procsynth__parse_maps(ps, f, pid, time, sink);
}

int vp_procsynth__parse_maps(struct vp_procsynth *ps, FILE *f, pid_t pid, uint64_t time, const struct vp_sink *sink)
{
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;
	struct vp_mmap *m = malloc(sizeof(*m) + PATH_MAX + 16);
	if (!m) {
		fclose(f);
		return -ENOMEM;
	}
	while (getline(&line, &cap, f) > 0) {
		unsigned long long start, end, pgoff, ino;
		unsigned maj, min;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &pgoff, &maj, &min,
			   &ino, &pos) < 7)
			continue;
		/* Only code can be sampled; data mappings would only cost space. */
		if (strlen(perms) < 4 || perms[2] != 'x')
			continue;
		char *file = line + pos;
		file[strcspn(file, "\n")] = '\0';
		if (!*file)
			file = "//anon";   /* perf's name for anonymous code, e.g. a JIT's code cache */
		size_t fl = strlen(file);
		if (fl > PATH_MAX)
			fl = PATH_MAX;
		memset(m, 0, sizeof(*m));
		m->pid = m->tid = (uint32_t)pid;
		m->start = start;
		m->len = end - start;
		m->pgoff = pgoff;
		m->maj = maj;
		m->min = min;
		m->ino = ino;
		m->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | PROT_EXEC;
		m->flags = perms[3] == 's' ? MAP_SHARED : MAP_PRIVATE;
		m->synthesized = 1;
		memcpy(m->filename, file, fl);
		memset(m->filename + fl, 0, 8);
		/* The length counts sizeof(*m), which includes 4 bytes of tail padding past
		 * offsetof(filename): readers that size the name from sizeof still get it whole. */
		if (file[0] == '/' && ino != 0 && !strstr(file, " (deleted)"))
			lookup_build_id(ps, pid, m, file);
		if ((ret = sink->emit(sink->ctx, VP_REC_MMAP, time, m, sizeof(*m) + fl + 1)))
			break;
	}
	free(m);
	free(line);
	fclose(f);
	return ret;
}

int vp_procsynth__process(struct vp_procsynth *ps, pid_t pid, uint64_t time, const struct vp_sink *sink)
{
	int e = synth_comms(pid, time, sink);
	if (e)
		return e;
	return synth_maps(ps, pid, time, sink);
}

/* A process that is gone or that we may not read is skipped by a /proc walk; any other
 * error (a failing sink) stops it. */
static bool unreadable(int r)
{
	return r == -ESRCH || r == -EACCES || r == -EPERM || r == -ENOENT;
}

int vp_procsynth__all(struct vp_procsynth *ps, uint64_t time, const struct vp_sink *sink)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	struct dirent *e;
	int n = 0, ret = 0;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		int r = vp_procsynth__process(ps, atoi(e->d_name), time, sink);
		if (r == 0)
			n++;
		else if (!unreadable(r)) {
			ret = r;
			break;
		}
	}
	closedir(d);
	return ret ? ret : n;
}

/* ---- The scan's cache (procsynth.h) ---- */

struct pc_entry {
	pid_t pid;
	bool dirty;
	uint32_t gen;        /* the last scan that saw it */
	uint8_t *recs;       /* {uint32_t type, uint32_t len, body, padded to 8}... */
	size_t len;
};

struct vp_procsynth_cache {
	struct pc_entry *v;  /* sorted by pid */
	size_t n, cap;
	uint32_t gen;
};

struct vp_procsynth_cache *vp_procsynth_cache__new(void)
{
	return calloc(1, sizeof(struct vp_procsynth_cache));
}

void vp_procsynth_cache__free(struct vp_procsynth_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].recs);
	free(c->v);
	free(c);
}

/* In the first n entries (sorted). */
static struct pc_entry *pc_find(struct vp_procsynth_cache *c, size_t n, pid_t pid)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->v[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && c->v[lo].pid == pid ? &c->v[lo] : NULL;
}

void vp_procsynth_cache__observe(struct vp_procsynth_cache *c, uint32_t type, const void *body, size_t len)
{
	uint32_t pid;
	if (!c || !c->n)
		return;
	switch (type) {
	case VP_REC_MMAP:
		if (len < sizeof(struct vp_mmap) || ((const struct vp_mmap *)body)->synthesized)
			return;
		pid = ((const struct vp_mmap *)body)->pid;
		break;
	case VP_REC_COMM:
		if (len < sizeof(struct vp_comm))
			return;
		pid = ((const struct vp_comm *)body)->pid;
		break;
	case VP_REC_FORK:
	case VP_REC_EXIT:
		if (len < sizeof(struct vp_task))
			return;
		pid = ((const struct vp_task *)body)->pid;
		break;
	default:
		return;
	}
	struct pc_entry *e = pc_find(c, c->n, (pid_t)pid);
	if (e)
		e->dirty = true;
}

void vp_procsynth_cache__invalidate(struct vp_procsynth_cache *c)
{
	for (size_t i = 0; c && i < c->n; i++)
		c->v[i].dirty = true;
}

/* Passes a synthesized record on and keeps a copy for the next scan. */
struct pc_capture {
	const struct vp_sink *next;
	uint8_t *buf;
	size_t len, cap;
	bool failed;
};

static int pc_capture_emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct pc_capture *k = ctx;
	size_t need = 8 + ((len + 7) & ~(size_t)7);
	if (!k->failed && len <= UINT32_MAX && !vp_grow((void **)&k->buf, &k->cap, k->len + need, 1)) {
		uint32_t h[2] = { type, (uint32_t)len };
		memcpy(k->buf + k->len, h, 8);
		memcpy(k->buf + k->len + 8, body, len);
		memset(k->buf + k->len + 8 + len, 0, need - 8 - len);
		k->len += need;
	} else {
		k->failed = true;   /* not kept: read again next time */
	}
	return k->next->emit(k->next->ctx, type, time, body, len);
}

static int pc_replay(const struct pc_entry *e, uint64_t time, const struct vp_sink *sink)
{
	for (size_t off = 0; off + 8 <= e->len;) {
		uint32_t h[2];
		memcpy(h, e->recs + off, 8);
		int r = sink->emit(sink->ctx, h[0], time, e->recs + off + 8, h[1]);
		if (r)
			return r;
		off += 8 + (((size_t)h[1] + 7) & ~(size_t)7);
	}
	return 0;
}

static int cmp_pc(const void *a, const void *b)
{
	const struct pc_entry *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int vp_procsynth_cache__all(struct vp_procsynth_cache *c, struct vp_procsynth *ps, uint64_t time,
			    const struct vp_sink *sink, int *read)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	struct dirent *de;
	int n = 0, ret = 0, nread = 0;
	size_t known = c->n;
	uint32_t gen = ++c->gen;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(de->d_name);
		struct pc_entry *e = pc_find(c, known, pid);   /* the sorted part: this scan's are new */
		if (e && !e->dirty) {
			if ((ret = pc_replay(e, time, sink)))
				break;
			e->gen = gen;
			n++;
			continue;
		}
		struct pc_capture k = { .next = sink };
		struct vp_sink ks = { .emit = pc_capture_emit, .ctx = &k };
		int r = vp_procsynth__process(ps, pid, time, &ks);
		nread++;
		if (r == 0 && !k.failed) {
			if (!e && !vp_grow((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v))) {
				e = &c->v[c->n++];
				*e = (struct pc_entry){ .pid = pid };
			}
			if (e) {
				free(e->recs);
				e->recs = k.buf;
				e->len = k.len;
				e->dirty = false;
				e->gen = gen;
				k.buf = NULL;
			}
		}
		free(k.buf);
		if (r == 0)
			n++;
		else if (!unreadable(r)) {
			ret = r;
			break;
		}
	}
	closedir(d);
	/* Processes gone (or unreadable, or not seen because the walk stopped) leave. */
	size_t keep = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].gen == gen)
			c->v[keep++] = c->v[i];
		else
			free(c->v[i].recs);
	}
	c->n = keep;
	qsort(c->v, c->n, sizeof(*c->v), cmp_pc);
	if (read)
		*read = nread;
	return ret ? ret : n;
}
