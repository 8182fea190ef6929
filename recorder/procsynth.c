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
		else if (r != -ESRCH && r != -EACCES && r != -EPERM && r != -ENOENT) {
			/* Only a failing sink stops the walk; a process we cannot read is skipped. */
			ret = r;
			break;
		}
	}
	closedir(d);
	return ret ? ret : n;
}
