/* The chunked container; see chunkfile.h and docs/formats.md. */
#include "common/chunkfile.h"
#include "common/safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util.h"

#define DEFAULT_CHUNK_BYTES (256u << 10)

struct cfile_writer {
	int fd;
	uint8_t *buf;      /* raw records of the open chunk */
	size_t len, cap;
	uint32_t nrecords;
	uint8_t *zbuf;
	size_t zcap;
	uint64_t bytes, records;
	int level;         /* zlib's: 1 unless set */
	int stuck;         /* a write timed out or its reader went (-errno): no more tries */
};

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct cfile_writer *cfile_writer__create(const char *path, uint32_t kind,
					  uint32_t format_version, size_t chunk_bytes,
					  bool private_file)
{
	return cfile_writer__create_at(AT_FDCWD, path, kind, format_version, chunk_bytes, private_file);
}

/* The writer around an open fd (taken: closed on failure too). */
static struct cfile_writer *writer_on_fd(int fd, uint32_t kind, uint32_t format_version, size_t chunk_bytes)
{
	struct cfile_writer *w = fd >= 0 ? calloc(1, sizeof(*w)) : NULL;
	int saved, err;
	if (!w) {
		saved = fd < 0 ? errno : ENOMEM;
		if (fd >= 0)
			close(fd);
		errno = saved;
		return NULL;
	}
	w->fd = fd;
	w->level = 1;
	w->cap = chunk_bytes ? chunk_bytes : DEFAULT_CHUNK_BYTES;
	if (w->cap > VP_MAX_CHUNK_RAW)
		w->cap = VP_MAX_CHUNK_RAW;
	w->buf = malloc(w->cap);
	w->zcap = compressBound(w->cap);
	w->zbuf = malloc(w->zcap);
	if (!w->buf || !w->zbuf) {
		errno = ENOMEM;
		goto fail;
	}
	struct vp_file_header h = {
		.magic = VP_FILE_MAGIC,
		.version = VP_CONTAINER_VERSION,
		.header_size = sizeof(h),
		.kind = kind,
		.flags = 0,
		.format_version = format_version,
		.created_ns = now_ns(CLOCK_MONOTONIC),
		.created_realtime_ns = now_ns(CLOCK_REALTIME),
	};
	err = vp_write_all(w->fd, &h, sizeof(h));
	if (err) {
		errno = -err;
		goto fail;
	}
	w->bytes = sizeof(h);
	return w;
fail:
	saved = errno;
	close(w->fd);
	free(w->buf);
	free(w->zbuf);
	free(w);
	errno = saved;
	return NULL;
}

struct cfile_writer *cfile_writer__create_at(int dirfd, const char *path, uint32_t kind,
					     uint32_t format_version, size_t chunk_bytes,
					     bool private_file)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, private_file ? 0600 : 0644);
	return writer_on_fd(fd, kind, format_version, chunk_bytes);
}

struct cfile_writer *cfile_writer__create_fd(int fd, uint32_t kind, uint32_t format_version, size_t chunk_bytes)
{
	return writer_on_fd(fd, kind, format_version, chunk_bytes);
}

void *cfile_writer__reserve(struct cfile_writer *w, uint32_t type, uint64_t time,
			    size_t body_len)
{
	size_t size = (sizeof(struct vp_record) + body_len + 7) & ~(size_t)7;
	if (size > VP_MAX_RECORD_SIZE || size > w->cap) {
		errno = EMSGSIZE;
		return NULL;
	}
	if (w->len + size > w->cap) {
		int err = cfile_writer__flush(w);
		if (err) {
			errno = -err;
			return NULL;
		}
	}
	struct vp_record *r = (struct vp_record *)(w->buf + w->len);
	memset(r, 0, size);
	r->type = type;
	r->size = (uint32_t)size;
	r->time = time;
	w->len += size;
	w->nrecords++;
	w->records++;
	return r + 1;
}

int cfile_writer__append(struct cfile_writer *w, uint32_t type, uint64_t time,
			 const void *body, size_t body_len)
{
	void *p = cfile_writer__reserve(w, type, time, body_len);
	if (!p)
		return -errno;
	if (body_len)
		memcpy(p, body, body_len);
	return 0;
}

void cfile_writer__set_level(struct cfile_writer *w, int level)
{
	if (w && level >= 0 && level <= 9)
		w->level = level;
}

int cfile_writer__flush(struct cfile_writer *w)
{
	if (!w || !w->len)
		return 0;
	/* A pipe whose reader fell behind or left (the service's stream to a client):
	 * each further chunk would wait the whole stall again, and one after a torn
	 * chunk could not be read anyway. */
	if (w->stuck)
		return w->stuck;
	uLongf zlen = w->zcap;
	/* Level 1 by default: the recorder compresses on the sampling path's heels; a
	 * higher level costs CPU on the profiled machine for a few percent of size. */
	if (compress2(w->zbuf, &zlen, w->buf, w->len, w->level) != Z_OK)
		return -ENOMEM;
	struct vp_chunk_header ch = {
		.magic = VP_CHUNK_MAGIC,
		.comp_size = (uint32_t)zlen,
		.raw_size = (uint32_t)w->len,
		.crc32 = (uint32_t)crc32(0L, w->zbuf, (uInt)zlen),
		.nrecords = w->nrecords,
	};
	ch.header_crc = (uint32_t)crc32(0L, (const Bytef *)&ch, offsetof(struct vp_chunk_header, header_crc));
	/* One write per chunk where possible, so that a kill leaves a torn tail at worst. */
	size_t total = sizeof(ch) + zlen;
	uint8_t stackbuf[sizeof(ch)];
	memcpy(stackbuf, &ch, sizeof(ch));
	int err = vp_write_all(w->fd, stackbuf, sizeof(ch));
	if (!err)
		err = vp_write_all(w->fd, w->zbuf, zlen);
	if (err == -ETIMEDOUT || err == -EPIPE)
		w->stuck = err;
	if (err)
		return err;
	w->bytes += total;
	w->len = 0;
	w->nrecords = 0;
	return 0;
}

uint64_t cfile_writer__bytes(const struct cfile_writer *w) { return w->bytes; }
int cfile_writer__fd(const struct cfile_writer *w)
{
	return w->fd;
}

uint64_t cfile_writer__records(const struct cfile_writer *w) { return w->records; }

int cfile_writer__close(struct cfile_writer *w)
{
	if (!w)
		return 0;
	int err = cfile_writer__flush(w);
	if (close(w->fd) < 0 && !err)
		err = -errno;
	free(w->buf);
	free(w->zbuf);
	free(w);
	return err;
}

/* ---------------------------------------------------------------- reader */

/* Damage recovery (docs/formats.md, "Recovery"): a chunk that fails any check is
 * skipped, and reading goes on at the next offset that holds a chunk header whose own
 * checksum and sizes hold. Only a short or zero tail with no chunk after it is a torn
 * tail (a killed writer); everything else skipped is counted as damage. */
struct cfile_reader {
	int fd;
	char *path;
	struct vp_file_header hdr;
	uint8_t *raw, *z, *scan;
	size_t raw_cap, z_cap;
	size_t pos, end;      /* cursor in raw */
	uint64_t chunks;
	off_t off;            /* file offset of the next chunk header */
	off_t chunk_off;      /* file offset of the chunk whose records are handed out */
	bool truncated, failed;
	char err[256];
	uint64_t skipped_chunks, skipped_bytes;  /* damage stepped over */
	off_t damage_off;     /* where the first damage was */
	char damage[96];      /* what the first damage was */
};

#define SCAN_BYTES (64u << 10)
static const uint8_t chunk_magic[4] = { 'C', 'H', 'N', 'K' };

static const char *kind_name(uint32_t k)
{
	switch (k) {
	case VP_KIND_SESSION_STREAM: return "session stream";
	case VP_KIND_CODEMAP: return "code map";
	default: return "unknown";
	}
}

struct cfile_reader *cfile_reader__open(const char *path, uint32_t kind, char *err, size_t errlen)
{
	struct cfile_reader *r = calloc(1, sizeof(*r));
	int e = 0;
	if (!r)
		return NULL;
	/* A session's jit/<pid>/ belongs to the JVM's user: what is there may be a FIFO or
	 * a device put there to hang root's reader. Only regular files, never blocking. */
	r->fd = vp_safe_open_regular(path, false);
	if (r->fd < 0) {
		e = -r->fd;
		vp_set_err(err, errlen, "%s: cannot open: %s", path,
			   e == EINVAL ? "not a regular file (a FIFO or a device is never read)" : strerror(e));
		goto fail;
	}
	uint8_t hb[512];
	ssize_t n = vp_read_full(r->fd, hb, 8);
	if (n < 0) {
		e = (int)-n;
		vp_set_err(err, errlen, "%s: cannot read: %s", path, strerror(e));
		goto fail;
	}
	if (n < 8) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: file is empty or truncated before its header (%zd bytes); the recording did not start", path, n);
		goto fail;
	}
	uint32_t magic;
	uint16_t ver, hsize;
	memcpy(&magic, hb, 4);
	memcpy(&ver, hb + 4, 2);
	memcpy(&hsize, hb + 6, 2);
	if (magic == __builtin_bswap32(VP_FILE_MAGIC)) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: written with the other byte order; read it on a little-endian host", path);
		goto fail;
	}
	if (magic != VP_FILE_MAGIC) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: not a viprof file (bad magic 0x%08x)", path, magic);
		goto fail;
	}
	if (ver != VP_CONTAINER_VERSION) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: container version %u is not supported (this viprof reads %u); use a matching viprof",
			path, ver, VP_CONTAINER_VERSION);
		goto fail;
	}
	if (hsize < sizeof(struct vp_file_header) || hsize > sizeof(hb)) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: bad header size %u", path, hsize);
		goto fail;
	}
	n = vp_read_full(r->fd, hb + 8, hsize - 8);
	if (n != (ssize_t)(hsize - 8)) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: truncated inside its header", path);
		goto fail;
	}
	memcpy(&r->hdr, hb, sizeof(r->hdr));
	if (r->hdr.flags & ~VP_FILE_FLAGS_KNOWN) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: unknown flags 0x%x; written by a newer viprof", path, r->hdr.flags);
		goto fail;
	}
	if (r->hdr.kind != kind) {
		e = EBADMSG;
		vp_set_err(err, errlen, "%s: is a %s file, expected a %s file", path,
			kind_name(r->hdr.kind), kind_name(kind));
		goto fail;
	}
	r->off = hsize;
	r->path = strdup(path);
	if (!r->path) {
		e = ENOMEM;
		vp_set_err(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	return r;
fail:
	if (r->fd >= 0)
		close(r->fd);
	free(r);
	errno = e ? e : EIO;
	return NULL;
}

const struct vp_file_header *cfile_reader__header(const struct cfile_reader *r) { return &r->hdr; }
bool cfile_reader__truncated(const struct cfile_reader *r) { return r->truncated; }
const char *cfile_reader__error(const struct cfile_reader *r) { return r->err; }
uint64_t cfile_reader__chunks(const struct cfile_reader *r) { return r->chunks; }

const char *cfile_reader__skipped(const struct cfile_reader *r, uint64_t *chunks, uint64_t *bytes)
{
	*chunks = r->skipped_chunks;
	*bytes = r->skipped_bytes;
	return r->skipped_chunks ? r->damage : NULL;
}

bool cfile_reader__damage(const struct cfile_reader *r, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	if (!r->skipped_chunks)
		return false;
	if (r->skipped_chunks == 1)
		snprintf(buf, len, "skipped 1 damaged chunk (%llu bytes at offset %lld) of %s: %s",
			 (unsigned long long)r->skipped_bytes, (long long)r->damage_off, r->path, r->damage);
	else
		snprintf(buf, len, "skipped %llu damaged chunks (%llu bytes, the first at offset %lld) of %s: %s (the first)",
			 (unsigned long long)r->skipped_chunks, (unsigned long long)r->skipped_bytes,
			 (long long)r->damage_off, r->path, r->damage);
	return true;
}

/* pread until n bytes, the end of the file, or an error: bytes read or -errno. */
static ssize_t pread_full(int fd, void *p, size_t n, off_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(fd, (uint8_t *)p + got, n - got, off + (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/* Inflates a zlib stream whose bytes the chunk's CRC-32 already vouched for, without
 * zlib's Adler-32 of the output: on a large session that checksum cost as much as a
 * tenth of a report. The 2-byte zlib header is checked; the 4-byte trailer is not. */
static int inflate_checked(uint8_t *dst, size_t *dlen, const uint8_t *src, size_t slen)
{
	if (slen < 6 || (src[0] & 0x0f) != Z_DEFLATED || (src[0] >> 4) > 7 || (src[1] & 0x20) ||
	    ((unsigned)src[0] << 8 | src[1]) % 31)
		return -EBADMSG;
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, -15) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)(uintptr_t)(src + 2);
	z.avail_in = (uInt)(slen - 6);
	z.next_out = dst;
	z.avail_out = (uInt)*dlen;
	int rc = inflate(&z, Z_FINISH);
	*dlen = z.total_out;
	inflateEnd(&z);
	return rc == Z_STREAM_END ? 0 : -EBADMSG;
}

static uint32_t header_crc(const struct vp_chunk_header *ch)
{
	return (uint32_t)crc32(0L, (const Bytef *)ch, offsetof(struct vp_chunk_header, header_crc));
}

/* Sizes a writer can produce: never an empty chunk, never more than the limits. A
 * reader checks them before it allocates anything. */
static bool sizes_ok(const struct vp_chunk_header *ch)
{
	return ch->raw_size && ch->raw_size <= VP_MAX_CHUNK_RAW &&
	       ch->comp_size && ch->comp_size <= compressBound(VP_MAX_CHUNK_RAW);
}

/* Finds the first offset at or after from that holds a chunk header we can trust: its
 * magic, its own checksum and its sizes hold (1 found, 0 none, -errno). A payload that
 * happens to contain the magic passes the checksum once in 2^32. */
static int find_header(struct cfile_reader *r, off_t from, off_t *found)
{
	const size_t hs = sizeof(struct vp_chunk_header);
	if (!r->scan && !(r->scan = malloc(SCAN_BYTES)))
		return -ENOMEM;
	for (off_t at = from;;) {
		ssize_t n = pread_full(r->fd, r->scan, SCAN_BYTES, at);
		if (n < 0)
			return (int)n;
		for (size_t i = 0; i + hs <= (size_t)n; i++) {
			const uint8_t *p = memchr(r->scan + i, chunk_magic[0], (size_t)n - hs + 1 - i);
			struct vp_chunk_header ch;
			if (!p)
				break;
			i = (size_t)(p - r->scan);
			if (memcmp(p, chunk_magic, sizeof(chunk_magic)))
				continue;
			memcpy(&ch, p, hs);
			if (header_crc(&ch) == ch.header_crc && sizes_ok(&ch)) {
				*found = at + (off_t)i;
				return 1;
			}
		}
		if ((size_t)n < SCAN_BYTES)
			return 0;
		/* The last hs - 1 bytes again: a header may straddle two reads. */
		at += n - (ssize_t)(hs - 1);
	}
}

static void note_damage(struct cfile_reader *r, off_t at, uint64_t bytes, const char *why)
{
	if (!r->skipped_chunks) {
		r->damage_off = at;
		snprintf(r->damage, sizeof(r->damage), "%s", why);
	}
	r->skipped_chunks++;
	r->skipped_bytes += bytes;
}

/* Steps over damage at r->off to the next trustworthy chunk header: 1 found, 0 none
 * (-errno on a read error). Without one, the rest of the file is skipped as damage,
 * or, when the damage looks like a torn tail (tentative), is the torn tail. */
static int step_over(struct cfile_reader *r, const char *why, bool tentative)
{
	off_t next = 0;
	struct stat st;
	int k = find_header(r, r->off + 1, &next);
	if (k < 0)
		return k;
	if (k == 0) {
		if (tentative) {
			r->truncated = true;
			return 0;
		}
		off_t size = fstat(r->fd, &st) == 0 && st.st_size > r->off ? st.st_size : r->off;
		note_damage(r, r->off, (uint64_t)(size - r->off), why);
		r->off = size;
		return 0;
	}
	note_damage(r, r->off, (uint64_t)(next - r->off), why);
	r->off = next;
	return 1;
}


/* Loads the next intact chunk: 1 loaded, 0 end of the file (clean, torn, or damaged to
 * the end), -errno on a read error or no memory (with the reason in r->err). */
static int load_chunk(struct cfile_reader *r)
{
	static const struct vp_chunk_header zero;
	for (;;) {
		struct vp_chunk_header ch;
		char sizes[96];
		const char *why = NULL;
		bool tentative = false;
		ssize_t n = pread_full(r->fd, &ch, sizeof(ch), r->off);
		int k;

		if (n < 0) {
			vp_set_err(r->err, sizeof(r->err), "%s: read error at offset %lld: %s", r->path,
				   (long long)r->off, strerror((int)-n));
			return (int)n;
		}
		if (n == 0)
			return 0;
		if ((size_t)n < sizeof(ch)) {
			/* A header cut short by a killed writer starts like one. */
			if (!memcmp(&ch, chunk_magic, (size_t)n < sizeof(chunk_magic) ? (size_t)n : sizeof(chunk_magic))) {
				r->truncated = true;
				return 0;
			}
			why = "not a chunk header";
		} else if (!memcmp(&ch, &zero, sizeof(ch))) {
			/* Zeros from a file system that extended the file but never wrote the
			 * data: a torn tail if no chunk follows. */
			why = "zeros instead of a chunk header";
			tentative = true;
		} else if (ch.magic != VP_CHUNK_MAGIC) {
			why = "not a chunk header";
		} else if (header_crc(&ch) != ch.header_crc) {
			why = "chunk header CRC mismatch";
		} else if (!sizes_ok(&ch)) {
			snprintf(sizes, sizeof(sizes), "chunk sizes out of bounds (%u bytes compressed, %u raw)",
				 ch.comp_size, ch.raw_size);
			why = sizes;
		} else if (vp_grow((void **)&r->z, &r->z_cap, ch.comp_size, 1) || vp_grow((void **)&r->raw, &r->raw_cap, ch.raw_size, 1)) {
			vp_set_err(r->err, sizeof(r->err), "%s: out of memory for a chunk of %u bytes", r->path, ch.raw_size);
			return -ENOMEM;
		} else if ((n = pread_full(r->fd, r->z, ch.comp_size, r->off + (off_t)sizeof(ch))) < 0) {
			vp_set_err(r->err, sizeof(r->err), "%s: read error at offset %lld: %s", r->path,
				   (long long)r->off, strerror((int)-n));
			return (int)n;
		} else if ((size_t)n < ch.comp_size) {
			/* A torn last chunk, or a damaged length: only a chunk header further
			 * on tells them apart. */
			why = "chunk runs past the end of the file";
			tentative = true;
		} else if ((uint32_t)crc32(0L, r->z, ch.comp_size) != ch.crc32) {
			why = "CRC mismatch";
		} else {
			size_t rawlen = ch.raw_size;
			if (inflate_checked(r->raw, &rawlen, r->z, ch.comp_size) || rawlen != ch.raw_size) {
				why = "payload does not inflate to its stated size";
			} else {
				r->chunk_off = r->off;
				r->off += (off_t)(sizeof(ch) + ch.comp_size);
				r->pos = 0;
				r->end = rawlen;
				r->chunks++;
				return 1;
			}
		}
		if ((k = step_over(r, why, tentative)) <= 0) {
			if (k < 0)
				vp_set_err(r->err, sizeof(r->err), "%s: cannot look for the next chunk: %s", r->path, strerror(-k));
			return k;
		}
	}
}

int cfile_reader__next(struct cfile_reader *r, const struct vp_record **rec)
{
	if (r->failed)
		return -EIO;
	for (;;) {
		if (r->pos >= r->end) {
			int k = load_chunk(r);
			if (k <= 0) {
				r->failed = k < 0;
				return k;
			}
		}
		const struct vp_record *h = (const struct vp_record *)(r->raw + r->pos);
		size_t left = r->end - r->pos;
		if (left < sizeof(*h) || h->size < sizeof(*h) || h->size > left || (h->size & 7)) {
			/* The chunk's checksum held, so a writer wrote this: the rest of the
			 * chunk cannot be framed and is skipped. */
			note_damage(r, r->chunk_off, left, "a record with a bad size");
			r->pos = r->end;
			continue;
		}
		r->pos += h->size;
		*rec = h;
		return 1;
	}
}

uint64_t cfile_reader__chunk_offset(const struct cfile_reader *r) { return (uint64_t)r->chunk_off; }
uint64_t cfile_reader__offset(const struct cfile_reader *r) { return (uint64_t)r->off; }

void cfile_reader__seek_chunk(struct cfile_reader *r, uint64_t off)
{
	r->off = (off_t)off;
	r->pos = r->end = 0;
}

void cfile_reader__close(struct cfile_reader *r)
{
	if (!r)
		return;
	close(r->fd);
	free(r->raw);
	free(r->z);
	free(r->scan);
	free(r->path);
	free(r);
}
