/* Shared by the libFuzzer targets: the readers under test take paths, so each input is
 * written to a file (in a private temporary directory made once per process). */
#ifndef VIPROF_FUZZ_UTIL_H
#define VIPROF_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fz_dir_path[64];

/* The directory and the inputs in it go when the fuzzer exits (it ends with exit()). */
static inline void fz_cleanup(void)
{
	DIR *d = opendir(fz_dir_path);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(fz_dir_path);
}

static inline const char *fz_dir(void)
{
	if (!fz_dir_path[0]) {
		snprintf(fz_dir_path, sizeof(fz_dir_path), "/tmp/vp-fuzz-XXXXXX");
		if (!mkdtemp(fz_dir_path))
			abort();
		atexit(fz_cleanup);
	}
	return fz_dir_path;
}

/* Writes data to <fz_dir>/<name>, replacing what was there; returns the path. */
static inline const char *fz_file(const char *name, const uint8_t *data, size_t size)
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
