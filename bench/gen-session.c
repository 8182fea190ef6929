/* Makes a large session out of a real one, for the report-scale benchmark: copies
 * SRC/stream.vps to DST/stream.vps record by record and writes each sample COPIES times
 * (same time, so each copy resolves in the same mappings and code-map epoch as the
 * original), with the END record's sample count scaled to match. The code maps (jit/)
 * and meta.json are copied by the caller (bench/report-scale.sh). What the report then
 * reads is a real recording's mix of stacks, depths, layers and symbols, COPIES times
 * over: it measures the report's cost per sample, not a synthetic best case.
 * Usage: gen-session SRC_DIR DST_DIR COPIES */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "common/util.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: gen-session SRC_DIR DST_DIR COPIES\n");
		return 2;
	}
	long long copies = vp_parse_num(argv[3], 1, 100000);
	if (copies < 1) {
		fprintf(stderr, "gen-session: COPIES must be a number from 1 to 100000, not '%s'\n", argv[3]);
		return 2;
	}
	char src[4096], dst[4096], err[512];
	snprintf(src, sizeof(src), "%s/%s", argv[1], VP_SESSION_STREAM);
	snprintf(dst, sizeof(dst), "%s/%s", argv[2], VP_SESSION_STREAM);
	if (mkdir(argv[2], 0700) && errno != EEXIST) {
		fprintf(stderr, "gen-session: cannot create %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	struct cfile_reader *r = cfile_reader__open(src, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "gen-session: %s\n", err);
		return 1;
	}
	struct cfile_writer *w = cfile_writer__create(dst, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, true);
	if (!w) {
		fprintf(stderr, "gen-session: cannot create %s: %s\n", dst, strerror(errno));
		cfile_reader__close(r);
		return 1;
	}
	const struct vp_record *rec;
	int k, ret = 0;
	unsigned long long samples = 0;
	while (ret == 0 && (k = cfile_reader__next(r, &rec)) == 1) {
		const void *body = vp_record_body(rec);
		size_t len = vp_record_body_len(rec);
		if (rec->type == VP_REC_SAMPLE) {
			for (long long i = 0; i < copies && ret == 0; i++)
				ret = cfile_writer__append(w, rec->type, rec->time, body, len);
			samples += (unsigned long long)copies;
		} else if (rec->type == VP_REC_END && len >= offsetof(struct vp_end, window_start)) {
			struct vp_end e = { 0 };   /* older sessions' END ends before window_start */
			size_t n = len < sizeof(e) ? len : sizeof(e);
			memcpy(&e, body, n);
			e.samples *= (uint64_t)copies;
			e.lost *= (uint64_t)copies;
			ret = cfile_writer__append(w, rec->type, rec->time, &e, n);
		} else {
			ret = cfile_writer__append(w, rec->type, rec->time, body, len);
		}
	}
	if (ret == 0 && k < 0) {
		fprintf(stderr, "gen-session: %s\n", cfile_reader__error(r));
		ret = k;
	}
	int c = cfile_writer__close(w);
	cfile_reader__close(r);
	if (ret == 0 && c)
		ret = c;
	if (ret) {
		fprintf(stderr, "gen-session: cannot write %s: %s\n", dst, strerror(-ret));
		return 1;
	}
	printf("%llu\n", samples);
	return 0;
}
