/* The session loader (postproc/session.c) on a session whose stream.vps is the input. */
#include <sys/stat.h>
#include "common/session_format.h"
#include "postproc/profile.h"
#include "postproc/session.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];

	fz_file(VP_SESSION_STREAM, data, size);
	struct vp_profile *p = vp_profile__new();
	if (!p)
		return 0;
	vp_session__load(fz_dir(), p, NULL, err, sizeof(err));
	vp_profile__free(p);
	return 0;
}
