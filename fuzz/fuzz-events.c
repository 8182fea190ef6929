/* The event list parser (hv-glue/events.c): -e's argument. */
#include "hv-glue/events.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[1024], err[512];
	struct sampler_event ev[VP_MAX_EVENTS];

	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = '\0';
	vp_events__parse(s, ev, VP_MAX_EVENTS, err, sizeof(err));
	return 0;
}
