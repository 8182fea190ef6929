/* Foreign code maps: perf-PID.map and jitdump, imported into a struct vp_codemap and exported
 * from one (see maps/codemap_io.h). Built through maps/codemap_build.h; the jitdump layout
 * (Linux tools/perf/util/jitdump.h) is this file's own. */
#define _GNU_SOURCE
#include "maps/codemap_io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "maps/codemap_build.h"
#include "maps/codemap_flat.h"
#include "maps/codemap_format.h"
#include "maps/epoch_rule.h"

/* ---- imports ---- */

struct vp_codemap *vp_codemap__import_perf_map(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	struct vp_codemap *m = NULL;
	int ret = 0;
	char line[8192];
	if (!f) {
		ret = -errno;
		vp_set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (!(m = vp_cm_build__new())) {
		ret = -ENOMEM;
		goto cleanup;
	}
	if ((ret = vp_cm_build__epoch(m, 0, VP_EPOCH_IMPORT, 0)))
		goto cleanup;
	for (unsigned long ln = 1; fgets(line, sizeof(line), f); ln++) {
		char *e1, *e2;
		unsigned long long start = strtoull(line, &e1, 16);
		unsigned long long size = strtoull(e1, &e2, 16);
		if (e1 == line || e2 == e1 || (*e2 != ' ' && *e2 != '\t')) {
			vp_set_err(err, errlen, "%s:%lu: expected \"START SIZE name\" in hex; is this a perf-PID.map?", path, ln);
			ret = -EBADMSG;
			goto cleanup;
		}
		char *name = e2 + 1;
		size_t nl = strcspn(name, "\n");
		if ((ret = vp_cm_build__method(m, start, (uint32_t)size, 0, 0, name, nl)))
			goto cleanup;
	}
	ret = vp_cm_build__finish(m, err, errlen);
cleanup:
	if (f)
		fclose(f);
	if (ret) {
		vp_codemap__free(m);
		errno = -ret;
		return NULL;
	}
	return m;
}

#define JITDUMP_MAGIC 0x4A695444u
struct jd_header {
	uint32_t magic, version, total_size, elf_mach, pad1, pid;
	uint64_t timestamp, flags;
};
struct jd_rec {
	uint32_t id, total_size;
	uint64_t timestamp;
};
struct jd_load {
	uint32_t pid, tid;
	uint64_t vma, code_addr, code_size, code_index;
};
struct jd_move {
	uint32_t pid, tid;
	uint64_t vma, old_code_addr, new_code_addr, code_size, code_index;
};
enum { JIT_CODE_LOAD = 0, JIT_CODE_MOVE = 1 };

/* Opens a new epoch when a load of size bytes at s overlaps a load of the current one:
 * the agent's rule (maps/epoch_rule.h). */
static int import_place(struct vp_codemap *m, struct vp_cm_ranges *placed, uint64_t s, uint64_t size, uint64_t t)
{
	int err;

	if (vp_cm_load_reuses(placed, s, size)) {
		if ((err = vp_cm_build__epoch(m, m->epochs[m->nepochs - 1].id + 1, VP_EPOCH_REUSE, t)))
			return err;
		vp_cm_ranges__clear(placed);
	}
	return vp_cm_ranges__insert(placed, s, vp_cm_load_end(s, size));
}

struct vp_codemap *vp_codemap__import_jitdump(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	struct vp_codemap *m = NULL;
	uint8_t *buf = NULL;
	int ret = 0;
	struct jd_header h;
	struct vp_cm_ranges placed = { 0 };   /* the loads of the current epoch */
	if (!f) {
		ret = -errno;
		vp_set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (fread(&h, sizeof(h), 1, f) != 1 || h.magic != JITDUMP_MAGIC || h.version != 1 ||
	    h.total_size < sizeof(h) || h.total_size > 4096) {
		ret = -EBADMSG;
		vp_set_err(err, errlen, "%s: not a little-endian jitdump version 1 file (magic 0x4A695444)", path);
		goto cleanup;
	}
	if (fseek(f, h.total_size, SEEK_SET) || !(m = vp_cm_build__new()) || !(buf = malloc(1 << 20))) {
		ret = errno ? -errno : -ENOMEM;
		goto cleanup;
	}
	m->pid = h.pid;
	m->created_ns = h.timestamp;
	if ((ret = vp_cm_build__epoch(m, 0, VP_EPOCH_IMPORT, 0)))
		goto cleanup;
	struct jd_rec r;
	while (fread(&r, sizeof(r), 1, f) == 1) {
		if (r.total_size < sizeof(r)) {
			ret = -EBADMSG;
			vp_set_err(err, errlen, "%s: jitdump record of size %u is too short; the file is damaged", path, r.total_size);
			goto cleanup;
		}
		size_t body = r.total_size - sizeof(r);
		if (r.id != JIT_CODE_LOAD && r.id != JIT_CODE_MOVE) {
			if (fseek(f, (long)body, SEEK_CUR))
				break;
			continue;
		}
		/* Load records carry the code after the name; read only the head we need. */
		size_t want = body < (1 << 20) ? body : (1 << 20);
		if (fread(buf, 1, want, f) != want)
			break; /* torn tail: keep what we have */
		if (body > want && fseek(f, (long)(body - want), SEEK_CUR))
			break;
		if (r.id == JIT_CODE_LOAD) {
			struct jd_load l;
			if (want < sizeof(l) + 1)
				goto short_rec;
			memcpy(&l, buf, sizeof(l));
			const char *name = (const char *)buf + sizeof(l);
			size_t nl = strnlen(name, want - sizeof(l));
			if (nl == want - sizeof(l) || l.code_size > UINT32_MAX)
				goto short_rec;
			if ((ret = import_place(m, &placed, l.code_addr, l.code_size, r.timestamp)) ||
			    (ret = vp_cm_build__method(m, l.code_addr, (uint32_t)l.code_size, l.code_index, r.timestamp,
						       name, nl)))
				goto cleanup;
		} else {
			struct jd_move mv;
			if (want < sizeof(mv))
				goto short_rec;
			memcpy(&mv, buf, sizeof(mv));
			uint32_t i = vp_cm_build__last_at(m, mv.old_code_addr);
			if (i == UINT32_MAX)
				continue;
			const char *name = m->methods[i].name;
			m->methods[i].unload_time = r.timestamp;
			if ((ret = import_place(m, &placed, mv.new_code_addr, mv.code_size, r.timestamp)) ||
			    (ret = vp_cm_build__method(m, mv.new_code_addr, (uint32_t)mv.code_size, mv.code_index, r.timestamp,
						       name, strlen(name))))
				goto cleanup;
		}
		continue;
short_rec:
		ret = -EBADMSG;
		vp_set_err(err, errlen, "%s: jitdump record id %u is malformed; the file is damaged", path, r.id);
		goto cleanup;
	}
	ret = vp_cm_build__finish(m, err, errlen);
cleanup:
	vp_cm_ranges__free(&placed);
	free(buf);
	if (f)
		fclose(f);
	if (ret) {
		vp_codemap__free(m);
		errno = -ret;
		return NULL;
	}
	return m;
}

/* ---- exports ---- */

/* Opens path to export into: a regular file only (O_NONBLOCK: a FIFO planted there
 * neither blocks nor is written), created 0600 like a session when missing. */
static int open_export(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	struct stat st;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ftruncate(fd, 0) != 0) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int vp_codemap__export_perf_map(const struct vp_codemap *m, const char *path)
{
	int fd = open_export(path);
	return fd < 0 ? fd : vp_codemap__export_perf_map_fd(m, fd);
}

int vp_codemap__export_jitdump(const struct vp_codemap *m, const char *path)
{
	int fd = open_export(path);
	return fd < 0 ? fd : vp_codemap__export_jitdump_fd(m, fd);
}

int vp_codemap__export_perf_map_fd(const struct vp_codemap *m, int fd)
{
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -errno;
	}
	const struct vp_cm_flat *fl = vp_cm_build__flat(m);
	for (size_t i = 0; i < fl->n; i++)
		fprintf(f, "%" PRIx64 " %" PRIx64 " %s\n", fl->iv[i].start, fl->iv[i].end - fl->iv[i].start,
			m->methods[fl->iv[i].method].name);
	for (size_t i = 0; i < m->nblobs; i++)
		fprintf(f, "%" PRIx64 " %x %s\n", m->blobs[i].start, m->blobs[i].size, m->blobs[i].name);
	int bad_write = ferror(f);
	if (fclose(f) || bad_write)
		return -EIO;
	return 0;
}

int vp_codemap__export_jitdump_fd(const struct vp_codemap *m, int fd)
{
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -errno;
	}
	struct jd_header h = { .magic = JITDUMP_MAGIC, .version = 1, .total_size = sizeof(h),
			       .elf_mach = 62 /* EM_X86_64 */, .pid = m->pid, .timestamp = m->created_ns };
	fwrite(&h, sizeof(h), 1, f);
	static const uint8_t zeros[4096];
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		size_t nl = strlen(x->name) + 1;
		struct jd_rec r = { .id = JIT_CODE_LOAD, .timestamp = x->load_time };
		r.total_size = (uint32_t)(sizeof(r) + sizeof(struct jd_load) + nl + x->size);
		struct jd_load l = { .pid = m->pid, .tid = m->pid, .vma = x->start, .code_addr = x->start,
				     .code_size = x->size, .code_index = i };
		fwrite(&r, sizeof(r), 1, f);
		fwrite(&l, sizeof(l), 1, f);
		fwrite(x->name, 1, nl, f);
		for (size_t left = x->size; left;) {
			size_t k = left < sizeof(zeros) ? left : sizeof(zeros);
			fwrite(zeros, 1, k, f);
			left -= k;
		}
	}
	int bad_write = ferror(f);
	if (fclose(f) || bad_write)
		return -EIO;
	return 0;
}
