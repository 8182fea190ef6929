/* Backend selection: one fixed order (bpf, then perf), the choice explained. */
#include <stdio.h>
#include <string.h>
#include "sampler-kernel/sampler.h"

static const struct sampler_backend *const order[] = { &sampler_backend_bpf, &sampler_backend_perf };

const struct sampler_backend *sampler__select(const char *name, const struct sampler_config *cfg,
					      char *why, size_t whylen)
{
	char reason[2][256];
	bool any = !name || !strcmp(name, "auto");

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const struct sampler_backend *b = order[i];

		if (!any && strcmp(name, b->name))
			continue;
		if (b->supported(cfg, reason[i], sizeof(reason[i]))) {
			if (b == &sampler_backend_bpf)
				snprintf(why, whylen, "bpf: loaded the eBPF sampler");
			else if (any)
				snprintf(why, whylen, "perf: %s", reason[0]);
			else
				snprintf(why, whylen, "perf: chosen with --backend perf");
			return b;
		}
		if (!any) {
			snprintf(why, whylen, "%s backend not usable here: %s", b->name, reason[i]);
			return NULL;
		}
	}
	if (any)
		snprintf(why, whylen, "no sampler backend can run here: bpf: %s; perf: %s",
			 reason[0], reason[1]);
	else
		snprintf(why, whylen, "unknown backend '%s'; use auto, bpf or perf", name);
	return NULL;
}
