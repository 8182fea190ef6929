/* The chunked container reader (common/chunkfile.c): any file, both kinds. */
#include "common/chunkfile.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = fz_file("c.vps", data, size);
	char err[256];

	for (uint32_t kind = VP_KIND_SESSION_STREAM; kind <= VP_KIND_CODEMAP; kind++) {
		struct cfile_reader *r = cfile_reader__open(p, kind, err, sizeof(err));
		const struct vp_record *rec;
		uint64_t sum = 0, c, b;

		if (!r)
			continue;
		while (cfile_reader__next(r, &rec) == 1)
			sum += rec->type + vp_record_body_len(rec);
		(void)cfile_reader__skipped(r, &c, &b);
		cfile_reader__close(r);
		(void)sum;
	}
	return 0;
}
