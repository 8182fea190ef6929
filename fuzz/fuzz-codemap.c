/* The code-map reader (maps/codemap.c) and the lookups on what it read. */
#include "maps/codemap.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct vp_codemap *m = vp_codemap__load_file(fz_file("codemap.vpm", data, size), err, sizeof(err));

	if (!m)
		return 0;
	for (size_t e = 0; e < m->nepochs; e++)
		vp_codemap__in_epoch(m, e, 0x1000);
	vp_codemap__flat(m, 0x1000);
	vp_codemap__method_at(m, 0x1000, 1000);
	for (size_t i = 0; i < m->nnames; i++)
		vp_codemap__line(&m->names[i], 3);
	vp_codemap__free(m);
	return 0;
}
