/* The viprof chunked container: the framing shared by every viprof on-disk stream
 * (the session's record stream, the agent's code maps). The record types that travel
 * inside it are defined by the format header of each stream: session_format.h and
 * maps/codemap_format.h. The prose spec is docs/formats.md.
 *
 * File   := file_header chunk*
 * chunk  := chunk_header zlib(record*)        (payload length and CRC32 in the header)
 * record := { u32 type; u32 size; u64 time; body }   size counts the 16-byte header,
 *           is a multiple of 8, and never crosses a chunk.
 *
 * All integers are little-endian. The magic reads "VIPF" in a hex dump of a
 * little-endian file; a reader on a big-endian host sees 0x46504956 and refuses.
 * A file is append-only; a writer that is killed leaves a file whose complete
 * chunks are all readable: the reader stops cleanly at a torn last chunk. A damaged
 * chunk is skipped and reading goes on at the next intact one (docs/formats.md,
 * "Recovery"). */
#ifndef VIPROF_CHUNKFILE_H
#define VIPROF_CHUNKFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VP_FILE_MAGIC   0x46504956u /* bytes 'V' 'I' 'P' 'F' on disk */
#define VP_CHUNK_MAGIC  0x4b4e4843u /* bytes 'C' 'H' 'N' 'K' on disk */
#define VP_CONTAINER_VERSION 1

/* What a container holds; a reader asks for one kind and refuses the others. */
enum vp_file_kind {
	VP_KIND_SESSION_STREAM = 1, /* records of session_format.h */
	VP_KIND_CODEMAP        = 2, /* records of maps/codemap_format.h */
};

/* No flag is defined yet; a reader rejects any set bit it does not know. */
#define VP_FILE_FLAGS_KNOWN 0u

struct vp_file_header {
	uint32_t magic;
	uint16_t version;      /* VP_CONTAINER_VERSION */
	uint16_t header_size;  /* sizeof(struct vp_file_header); readers skip extra */
	uint32_t kind;         /* enum vp_file_kind */
	uint32_t flags;
	uint32_t format_version; /* version of the record format inside (per kind) */
	uint32_t reserved;
	uint64_t created_ns;   /* CLOCK_MONOTONIC */
	uint64_t created_realtime_ns; /* CLOCK_REALTIME at the same moment */
};

struct vp_chunk_header {
	uint32_t magic;
	uint32_t comp_size;   /* bytes of zlib payload after this header */
	uint32_t raw_size;    /* bytes of records once inflated */
	uint32_t crc32;       /* zlib crc32 of the compressed payload */
	uint32_t nrecords;
	uint32_t header_crc;  /* crc32 of the preceding 20 bytes: a torn header is caught */
};

struct vp_record {
	uint32_t type;
	uint32_t size;  /* whole record including this header, multiple of 8 */
	uint64_t time;  /* CLOCK_MONOTONIC ns; 0 when a record has no time */
};

#define VP_MAX_CHUNK_RAW   (16u << 20)  /* readers refuse larger chunks */
#define VP_MAX_RECORD_SIZE (1u << 20)

/* ---- writer ----
 * Not thread-safe; one writer per file. Records are buffered into the current chunk,
 * which is compressed and written when it reaches chunk_bytes or on flush(). */
struct cfile_writer;

/* Creates path with O_CREAT|O_EXCL|O_NOFOLLOW (mode 0644 unless private, then 0600).
 * Returns NULL and sets errno on failure. chunk_bytes 0 picks the default (256 KiB). */
struct cfile_writer *cfile_writer__create(const char *path, uint32_t kind,
					  uint32_t format_version, size_t chunk_bytes,
					  bool private_file);
/* The same, with path relative to the directory fd dirfd (AT_FDCWD for the above). */
struct cfile_writer *cfile_writer__create_at(int dirfd, const char *path, uint32_t kind,
					     uint32_t format_version, size_t chunk_bytes,
					     bool private_file);
/* The same into an fd opened by someone else (taken: closed by the writer, also on
 * failure), e.g. a pipe to the process that stores the file (the service's stream to
 * a user's client). Only ever appended to. */
struct cfile_writer *cfile_writer__create_fd(int fd, uint32_t kind, uint32_t format_version, size_t chunk_bytes);
/* Appends one record; body may be NULL when body_len is 0. Returns 0 or -errno. */
int cfile_writer__append(struct cfile_writer *w, uint32_t type, uint64_t time,
			 const void *body, size_t body_len);
/* Reserves a record of body_len bytes and returns a pointer to its zeroed body, valid
 * until the next call on w; NULL and errno on failure. Saves a copy on hot paths. */
void *cfile_writer__reserve(struct cfile_writer *w, uint32_t type, uint64_t time,
			    size_t body_len);
int cfile_writer__flush(struct cfile_writer *w);  /* writes the open chunk, if any */
/* zlib's level for the chunks written from now on (default 1; 0 stores them: no
 * compression CPU, the same format). */
void cfile_writer__set_level(struct cfile_writer *w, int level);
uint64_t cfile_writer__bytes(const struct cfile_writer *w); /* bytes on disk so far */
uint64_t cfile_writer__records(const struct cfile_writer *w);
int cfile_writer__fd(const struct cfile_writer *w);   /* the file, e.g. to fchown it */
int cfile_writer__close(struct cfile_writer *w);  /* flushes; accepts NULL */

/* ---- reader ---- */
struct cfile_reader;

/* Opens and validates the file header. On failure returns NULL, sets errno, and writes
 * a one-line reason naming the file into err (if err is not NULL). */
struct cfile_reader *cfile_reader__open(const char *path, uint32_t kind,
					char *err, size_t errlen);
const struct vp_file_header *cfile_reader__header(const struct cfile_reader *r);
/* Returns 1 and sets *rec to the next record (valid until the next call), 0 at the end
 * (including a torn last chunk, see truncated()), or -errno when the file cannot be
 * read (an I/O error, no memory), with the reason in error(). Damage is not an error:
 * a chunk that fails a check (header checksum, sizes, payload CRC, inflate, a length
 * past the end with a chunk after it, a record that does not fit) is skipped and
 * counted, and the next record comes from the next intact chunk. */
int cfile_reader__next(struct cfile_reader *r, const struct vp_record **rec);
bool cfile_reader__truncated(const struct cfile_reader *r); /* torn tail seen */
const char *cfile_reader__error(const struct cfile_reader *r);
uint64_t cfile_reader__chunks(const struct cfile_reader *r); /* intact chunks read */
/* What the reader stepped over so far: returns why the first damage was skipped (NULL
 * when none) and sets the number of damaged chunks and the bytes they spanned. */
const char *cfile_reader__skipped(const struct cfile_reader *r, uint64_t *chunks, uint64_t *bytes);
/* The same as one line for a warning, e.g. "skipped 1 damaged chunk (4096 bytes at
 * offset 1740) of s/stream.vps: CRC mismatch"; false (and "") when nothing was
 * skipped. */
bool cfile_reader__damage(const struct cfile_reader *r, char *buf, size_t len);
/* The file offset of the chunk the last record came from; and reading on from the
 * chunk at such an offset (one this reader or another handed records out of), the
 * rest of the current chunk dropped: a second look at part of a file without reading
 * what came before it. */
uint64_t cfile_reader__chunk_offset(const struct cfile_reader *r);
void cfile_reader__seek_chunk(struct cfile_reader *r, uint64_t off);
/* The file offset the reader has read up to (the end of the last chunk it read): the
 * bytes of the file behind the records handed out so far. */
uint64_t cfile_reader__offset(const struct cfile_reader *r);
void cfile_reader__close(struct cfile_reader *r); /* accepts NULL */

/* Body of a record, and its length. */
static inline const void *vp_record_body(const struct vp_record *r) { return r + 1; }
static inline size_t vp_record_body_len(const struct vp_record *r) { return r->size - sizeof(*r); }

#endif
