/* /proc/PID/maps parsing (recorder/procsynth.c) into MMAP records. */
#include "recorder/procsynth.h"
#include "fuzz-util.h"

static int sink_emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vp_procsynth *ps;
	struct vp_sink sink = { .emit = sink_emit };
	FILE *f;

	if (!ps && !(ps = vp_procsynth__new()))
		abort();
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	/* A pid that cannot exist: the build-id lookups it tries find nothing. */
	vp_procsynth__parse_maps(ps, f, 0x3fffffff, 1, &sink);
	return 0;
}
