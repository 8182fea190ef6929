#include "common/timezero.h"

#include <stdlib.h>
#include <string.h>

#include "common/chunkfile.h"
#include "common/session_format.h"

/* The value of key in a META record's "key\0value\0" pairs, or NULL. */
static const char *meta_value(const struct vp_record *r, const char *key)
{
	const char *b = vp_record_body(r), *end = b + vp_record_body_len(r);
	while (b < end) {
		const char *kz = memchr(b, '\0', (size_t)(end - b));
		if (!kz || kz + 1 >= end)
			return NULL;
		const char *v = kz + 1, *vz = memchr(v, '\0', (size_t)(end - v));
		if (!vz)
			return NULL;
		if (!strcmp(b, key))
			return v;
		b = vz + 1;
	}
	return NULL;
}

uint64_t vp_session_time_zero(const char *stream_path, bool *sampling)
{
	struct cfile_reader *r = cfile_reader__open(stream_path, VP_KIND_SESSION_STREAM, NULL, 0);
	uint64_t t0 = r ? cfile_reader__header(r)->created_ns : 0;
	const struct vp_record *rec;
	if (sampling)
		*sampling = false;
	/* The recorder writes the key before any sample can be drained: the search ends at
	 * the first sample, so that an older session costs only the records before it. */
	while (r && cfile_reader__next(r, &rec) == 1 && rec->type != VP_REC_SAMPLE) {
		const char *v = rec->type == VP_REC_META ? meta_value(rec, VP_META_SAMPLING_START) : NULL;
		uint64_t s = v ? strtoull(v, NULL, 10) : 0;
		if (s) {
			t0 = s;
			if (sampling)
				*sampling = true;
			break;
		}
	}
	cfile_reader__close(r);
	return t0;
}
