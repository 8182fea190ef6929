/* perf-PID.map import (maps/codemap.c). */
#include "maps/codemap.h"
#include "maps/codemap_io.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct vp_codemap *m = vp_codemap__import_perf_map(fz_file("perf-1.map", data, size), err, sizeof(err));

	if (m) {
		vp_codemap__flat(m, 0x1000);
		vp_codemap__free(m);
	}
	return 0;
}
