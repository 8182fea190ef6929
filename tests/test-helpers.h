/* Small helpers more than one test needs: reading a file whole, burning CPU time, an
 * address from nm. Header-only, each test is its own program; running a child process
 * is tests/test-run.h. */
#ifndef VIPROF_TEST_HELPERS_H
#define VIPROF_TEST_HELPERS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "test.h"

/* All of f up to EOF, NUL-terminated (its length in *len when len is not NULL). */
static inline char *test_read_all(FILE *f, const char *what, size_t *len)
{
	char *b = NULL;
	size_t cap = 0, n = 0, r;
	do {
		/* realloc, not vp_grow: tests that link no viprof library use this too. */
		if (n + 4097 > cap) {
			cap = 2 * cap + 4097;
			if (!(b = realloc(b, cap)))
				FAIL("out of memory reading %s", what);
		}
		r = fread(b + n, 1, 4096, f);
		n += r;
	} while (r > 0);
	b[n] = 0;
	if (len)
		*len = n;
	return b;
}

/* The whole file at path, NUL-terminated (its length in *len when len is not NULL);
 * NULL when it cannot be opened. */
static inline char *test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *b = test_read_all(f, path, len);
	fclose(f);
	return b;
}

/* The text of the file at path, or "" when it cannot be opened (a log or an output
 * not written yet): never NULL, so that asserts on it say what was missing. */
static inline char *test_slurp_str(const char *path)
{
	char *s = test_slurp(path, NULL);
	return s ? s : strdup("");
}

/* Burns ms of this thread's CPU time (not wall time: others may share the machine). */
static volatile uint64_t test_burn_sink;
static inline void burn_ms(int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 10000; i++)
			test_burn_sink += (uint64_t)i * i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < ms * 1000000LL);
}

/* The address nm printed for name in the capture file nmfile; FAILs if absent. */
static inline uint64_t nm_addr(const char *nmfile, const char *name)
{
	FILE *f = fopen(nmfile, "r");
	if (!f)
		FAIL("cannot open %s: %s", nmfile, strerror(errno));
	char line[512], sym[400], type;
	unsigned long long a;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %399s", &a, &type, sym) == 3 && !strcmp(sym, name)) {
			fclose(f);
			return a;
		}
	}
	fclose(f);
	FAIL("%s not in %s", name, nmfile);
}

#endif
