/* The chunked container: round trip, a torn tail at every length, corruption, and the
 * header checks (magic, byte order, version, flags, kind). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "test.h"

static char dir[] = "/tmp/vp-test-chunkfile-XXXXXX";

static void write_sample_file(const char *path, int nrec, size_t chunk)
{
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, 1, chunk, false);
	ASSERT_NOT_NULL(w);
	for (int i = 0; i < nrec; i++) {
		uint64_t body[3] = { (uint64_t)i, (uint64_t)i * 7, 0xabcdefull };
		ASSERT_OK(cfile_writer__append(w, 100 + (i % 3), 1000 + (uint64_t)i, body, (size_t)(8 + 8 * (i % 3))));
	}
	ASSERT_OK(cfile_writer__close(w));
}

/* Reads everything; returns the number of records, checking their contents. */
static int read_all(const char *path, int *status, bool *truncated)
{
	char err[256];
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r) {
		*status = -errno;
		return -1;
	}
	const struct vp_record *rec;
	int n = 0, k;
	uint64_t next = 0;
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		/* Each record carries its number: damage may skip some, never reorder or
		 * alter what is returned. */
		const uint64_t *b = vp_record_body(rec);
		uint64_t i = b[0];
		ASSERT_GE(i, next);
		ASSERT_EQ(rec->type, 100 + (i % 3));
		ASSERT_UEQ(rec->time, 1000 + i);
		ASSERT_GE(vp_record_body_len(rec), (size_t)(8 + 8 * (i % 3)));
		next = i + 1;
		n++;
	}
	*status = k;
	*truncated = cfile_reader__truncated(r);
	cfile_reader__close(r);
	return n;
}

static void copy_prefix(const char *src, const char *dst, off_t len)
{
	FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
	ASSERT_NOT_NULL(in);
	ASSERT_NOT_NULL(out);
	for (off_t i = 0; i < len; i++) {
		int c = fgetc(in);
		ASSERT_NE(c, EOF);
		fputc(c, out);
	}
	fclose(in);
	fclose(out);
}

int main(void)
{
	ASSERT_NOT_NULL(mkdtemp(dir));
	char path[256], tmp[256];
	snprintf(path, sizeof(path), "%s/a.vps", dir);
	snprintf(tmp, sizeof(tmp), "%s/t.vps", dir);

	/* Small chunks so that the file holds many. */
	write_sample_file(path, 5000, 4096);
	int st;
	bool trunc;
	ASSERT_EQ(read_all(path, &st, &trunc), 5000);
	ASSERT_EQ(st, 0);
	ASSERT_FALSE(trunc);

	/* O_EXCL: an existing file is never overwritten. */
	ASSERT_NULL(cfile_writer__create(path, VP_KIND_SESSION_STREAM, 1, 0, false));
	ASSERT_EQ(errno, EEXIST);

	/* A torn tail at every length: never an error, never a bad record, and the
	 * number of records read never decreases as the prefix grows. */
	struct stat sb;
	ASSERT_OK(stat(path, &sb));
	int prev = 0;
	for (off_t len = sizeof(struct vp_file_header); len < sb.st_size; len += 97) {
		unlink(tmp);
		copy_prefix(path, tmp, len);
		int n = read_all(tmp, &st, &trunc);
		ASSERT_EQ(st, 0);
		ASSERT_GE(n, prev);
		prev = n;
	}
	ASSERT_GT(prev, 4500);

	/* A flipped byte anywhere in a stretch of chunks (headers, lengths, payload,
	 * checksums): the damaged chunk is skipped, every other record is read, and the
	 * reader says what it skipped. */
	int fd;
	unsigned char c;
	int n, worst = 5000;
	for (off_t at = sb.st_size / 2; at < sb.st_size / 2 + 600; at += 3) {
		unlink(tmp);
		copy_prefix(path, tmp, sb.st_size);
		fd = open(tmp, O_RDWR);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(pread(fd, &c, 1, at), 1);
		c ^= 0x5a;
		ASSERT_EQ(pwrite(fd, &c, 1, at), 1);
		close(fd);
		n = read_all(tmp, &st, &trunc);
		ASSERT_EQ(st, 0);
		ASSERT_LT(n, 5000);
		/* A 4 KiB chunk holds a few hundred of these records: at most two chunks go. */
		ASSERT_GT(n, 5000 - 2 * 400);
		if (n < worst)
			worst = n;
	}
	fprintf(stderr, "200 single-byte flips: at least %d of 5000 records read each time\n", worst);

	/* Garbage after a complete file: everything is read, the garbage is skipped. */
	unlink(tmp);
	copy_prefix(path, tmp, sb.st_size);
	fd = open(tmp, O_WRONLY | O_APPEND);
	for (int i = 0; i < 100; i++) {
		c = (unsigned char)(i * 37 + 11);
		ASSERT_EQ(write(fd, &c, 1), 1);
	}
	close(fd);
	ASSERT_EQ(read_all(tmp, &st, &trunc), 5000);
	ASSERT_EQ(st, 0);
	{
		char e2[256];
		const struct vp_record *rec;
		uint64_t sc = 0, sbytes = 0;
		struct cfile_reader *r = cfile_reader__open(tmp, VP_KIND_SESSION_STREAM, e2, sizeof(e2));
		ASSERT_NOT_NULL(r);
		while (cfile_reader__next(r, &rec) == 1)
			;
		ASSERT_NOT_NULL(cfile_reader__skipped(r, &sc, &sbytes));
		ASSERT_UEQ(sbytes, 100);
		cfile_reader__close(r);
	}

	/* Header checks, each with a message naming the cause. */
	fd = -1;
	struct { size_t off; uint32_t val; size_t width; const char *expect; } cases[] = {
		{ 0, 0x12345678, 4, "not a viprof file" },
		{ 0, 0x56495046, 4, "other byte order" },
		{ 4, 99, 2, "version 99" },
		{ 12, 0x8, 4, "unknown flags" },
		{ 8, VP_KIND_CODEMAP, 4, "code map file" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unlink(tmp);
		copy_prefix(path, tmp, sb.st_size);
		fd = open(tmp, O_RDWR);
		ASSERT_EQ(pwrite(fd, &cases[i].val, cases[i].width, (off_t)cases[i].off), (ssize_t)cases[i].width);
		close(fd);
		char err[256] = "";
		struct cfile_reader *r = cfile_reader__open(tmp, VP_KIND_SESSION_STREAM, err, sizeof(err));
		ASSERT_NULL(r);
		ASSERT_CONTAINS(err, cases[i].expect);
		ASSERT_CONTAINS(err, tmp);
	}

	/* Empty file. */
	unlink(tmp);
	close(open(tmp, O_CREAT | O_WRONLY, 0644));
	char err[256] = "";
	ASSERT_NULL(cfile_reader__open(tmp, VP_KIND_SESSION_STREAM, err, sizeof(err)));
	ASSERT_CONTAINS(err, "truncated before its header");

	unlink(tmp);
	unlink(path);
	rmdir(dir);
	return 0;
}
