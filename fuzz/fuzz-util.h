/* Shared by the libFuzzer targets: the readers under test take paths, so each input is
 * written to a file (in a private temporary directory made once per process). */
#ifndef VIPROF_FUZZ_UTIL_H
#define VIPROF_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *fz_dir(void)
{
	static char dir[64];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/vp-fuzz-XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	return dir;
}

/* Writes data to <fz_dir>/<name>, replacing what was there; returns the path. */
static const char *fz_file(const char *name, const uint8_t *data, size_t size)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", fz_dir(), name);
	unlink(path);
	f = fopen(path, "wb");
	if (!f || (size && fwrite(data, 1, size, f) != size))
		abort();
	fclose(f);
	return path;
}

#endif
