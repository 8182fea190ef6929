/* Backend selection: a fixed order, the choice explained. */
#include <stdio.h>
#include <string.h>
#include "sampler-kernel/sampler.h"

const struct sampler_backend *sampler__select(const char *name, const struct sampler_config *cfg,
					      char *why, size_t whylen)
{
	snprintf(why, whylen, "no sampler backend is built yet");
	return NULL;
}
