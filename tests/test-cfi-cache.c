/* The unwind-rule cache (recorder/cfi.h): a table stored and loaded back is the same table
 * (rules, base, segments, source); a changed file identity misses; a damaged entry (a
 * flipped rule byte, a cut file, unsorted rules under a fixed CRC) is refused and
 * replaced on the next store; a directory others may write is not used. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "recorder/cfi.h"
#include "test.h"
#include "test-run.h"

static void same(const struct vp_cfi *a, const struct vp_cfi *b)
{
	size_t na, nb;
	const struct vpb_rule *ra = vp_cfi__rules(a, &na), *rb = vp_cfi__rules(b, &nb);
	ASSERT_UEQ(na, nb);
	ASSERT_TRUE(na > 100);
	ASSERT_EQ(memcmp(ra, rb, na * sizeof(*ra)), 0);
	ASSERT_UEQ(vp_cfi__base(a), vp_cfi__base(b));
	ASSERT_STREQ(vp_cfi__source(a), vp_cfi__source(b));
	ASSERT_EQ(vp_cfi__cut(a), vp_cfi__cut(b));
	/* Segments: the same file offsets map to the same addresses. */
	for (uint64_t off = 0; off < (1u << 20); off += 4096) {
		uint64_t va = 0, vb = 0;
		int ea = vp_cfi__vaddr_of_offset(a, off, &va), eb = vp_cfi__vaddr_of_offset(b, off, &vb);
		ASSERT_EQ(ea, eb);
		ASSERT_UEQ(va, vb);
	}
}

static char entry[512];

static void find_entry(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "ls %s | head -1", dir);
	FILE *p = run_sh_file(cmd, NULL);
	ASSERT_NOT_NULL(p);
	char name[256] = "";
	ASSERT_NOT_NULL(fgets(name, sizeof(name), p));
	fclose(p);
	name[strcspn(name, "\n")] = '\0';
	snprintf(entry, sizeof(entry), "%s/%s", dir, name);
}

static void patch(long off, const void *bytes, size_t n)
{
	int fd = open(entry, O_WRONLY);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

static void key_path(const char *dir, const struct vp_cfi_key *k, char *out, size_t len)
{
	snprintf(out, len, "%s/%llx-%llx-%llx-%llx.v%u", dir, (unsigned long long)k->dev, (unsigned long long)k->ino,
		 (unsigned long long)k->size, (unsigned long long)k->mtime_ns, VP_CFI_CACHE_VERSION);
}

/* Sets an entry's (or a file's) last use to days ago. */
static void age_path(const char *path, int days)
{
	struct timespec t[2];
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= (time_t)days * 86400;
	t[1] = t[0];
	ASSERT_EQ(utimensat(AT_FDCWD, path, t, 0), 0);
}

static void age(const char *dir, const struct vp_cfi_key *k, int days)
{
	char p[512];
	key_path(dir, k, p, sizeof(p));
	age_path(p, days);
}

static bool present(const char *dir, const struct vp_cfi_key *k)
{
	char p[512];
	key_path(dir, k, p, sizeof(p));
	return access(p, F_OK) == 0;
}

static bool named(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* A file of ours in the cache, last used days ago. */
static void plant(const char *dir, const char *name, int days)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, "x", 1), 1);
	close(fd);
	age_path(p, days);
}

int main(void)
{
	char err[256], dir[] = "/tmp/vp-cfi-cache-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir));
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	struct vp_cfi *built = vp_cfi__build(fd, err, sizeof(err));
	if (!built)
		FAIL("build: %s", err);
	close(fd);

	setenv("VIPROF_UNWIND_CACHE", dir, 1);
	int cd = vp_cfi__cache_open();
	ASSERT_TRUE(cd >= 0);
	struct vp_cfi_key k = { 1, 2, 3, 4 }, other = { 1, 2, 3, 5 };
	errno = 0;
	ASSERT_NULL(vp_cfi__cache_load(cd, &k));
	ASSERT_EQ(errno, ENOENT);
	ASSERT_EQ(vp_cfi__cache_store(cd, &k, built), 0);
	struct vp_cfi *loaded = vp_cfi__cache_load(cd, &k);
	ASSERT_NOT_NULL(loaded);
	same(built, loaded);
	vp_cfi__free(loaded);
	ASSERT_NULL(vp_cfi__cache_load(cd, &other));   /* the file changed: a miss */

	/* A flipped byte in the rules: the CRC refuses it. */
	find_entry(dir);
	struct vp_cfi_cache_hdr h;
	int efd = open(entry, O_RDONLY);
	ASSERT_EQ(read(efd, &h, sizeof(h)), (ssize_t)sizeof(h));
	close(efd);
	uint8_t x = 0x5a;
	patch((long)sizeof(h) + 13, &x, 1);
	errno = 0;
	ASSERT_NULL(vp_cfi__cache_load(cd, &k));
	ASSERT_EQ(errno, EBADMSG);
	/* Rules out of order under a matching CRC: refused too. */
	ASSERT_EQ(vp_cfi__cache_store(cd, &k, built), 0);
	size_t n;
	const struct vpb_rule *r = vp_cfi__rules(built, &n);
	struct vpb_rule *bad = malloc(n * sizeof(*bad));
	ASSERT_NOT_NULL(bad);
	memcpy(bad, r, n * sizeof(*bad));
	struct vpb_rule tmp = bad[5];
	bad[5] = bad[6];
	bad[6] = tmp;
	patch((long)sizeof(h), bad, n * sizeof(*bad));
	h.rules_crc32 = (uint32_t)crc32(0L, (const Bytef *)bad, (uInt)(n * sizeof(*bad)));
	patch(0, &h, sizeof(h));
	ASSERT_NULL(vp_cfi__cache_load(cd, &k));
	free(bad);
	/* Cut short: refused; a new store replaces it. */
	ASSERT_EQ(truncate(entry, (off_t)sizeof(h) + 8), 0);
	ASSERT_NULL(vp_cfi__cache_load(cd, &k));
	ASSERT_EQ(vp_cfi__cache_store(cd, &k, built), 0);
	loaded = vp_cfi__cache_load(cd, &k);
	ASSERT_NOT_NULL(loaded);
	same(built, loaded);
	vp_cfi__free(loaded);
	close(cd);

	/* The bounds (issue 31): the least recently used entries go first (a load counts
	 * as a use), entries unused past the age go at open, a table over the size bound
	 * alone is not stored, and only the cache's own names are ever removed. */
	struct stat st;
	ASSERT_EQ(stat(entry, &st), 0);
	long long one = (long long)st.st_size;
	struct vp_cfi_key ka = { 9, 1, 3, 4 }, kb = { 9, 2, 3, 4 }, kc = { 9, 3, 3, 4 }, kd = { 9, 4, 3, 4 };
	unsetenv("VIPROF_UNWIND_CACHE_MAX");
	unsetenv("VIPROF_UNWIND_CACHE_AGE");
	cd = vp_cfi__cache_open();
	ASSERT_TRUE(cd >= 0);
	ASSERT_EQ(vp_cfi__cache_store(cd, &ka, built), 0);
	ASSERT_EQ(vp_cfi__cache_store(cd, &kb, built), 0);
	ASSERT_EQ(vp_cfi__cache_store(cd, &kc, built), 0);
	age(dir, &k, 4);
	age(dir, &kb, 3);
	age(dir, &kc, 2);
	age(dir, &ka, 1);
	loaded = vp_cfi__cache_load(cd, &ka);   /* a: used now */
	ASSERT_NOT_NULL(loaded);
	vp_cfi__free(loaded);
	plant(dir, "notes.txt", 9);                  /* not the cache's: never removed */
	plant(dir, "9-9-3-4.v1.orig", 9);
	plant(dir, ".9-5-3-4.v1.4242", 0);           /* a fresh temporary file: a writer's */
	plant(dir, ".9-6-3-4.v1.4243", 1);           /* a day old: a dead writer's */
	plant(dir, "9-7-3-4.v0", 0);                 /* another format version */
	char max[32];
	snprintf(max, sizeof(max), "%lld", 3 * one);
	setenv("VIPROF_UNWIND_CACHE_MAX", max, 1);
	ASSERT_EQ(vp_cfi__cache_store(cd, &kd, built), 0);   /* k, a, b, c, d: 5 over 3 */
	ASSERT_FALSE(present(dir, &k));
	ASSERT_FALSE(present(dir, &kb));
	ASSERT_TRUE(present(dir, &kc));
	ASSERT_TRUE(present(dir, &ka));
	ASSERT_TRUE(present(dir, &kd));
	ASSERT_TRUE(named(dir, "notes.txt") && named(dir, "9-9-3-4.v1.orig") && named(dir, ".9-5-3-4.v1.4242"));
	ASSERT_FALSE(named(dir, ".9-6-3-4.v1.4243"));
	ASSERT_FALSE(named(dir, "9-7-3-4.v0"));
	/* Unused for 2 days, with an age of 1 day: gone at the next open. */
	setenv("VIPROF_UNWIND_CACHE_AGE", "1d", 1);
	int cd2 = vp_cfi__cache_open();
	ASSERT_TRUE(cd2 >= 0);
	close(cd2);
	ASSERT_FALSE(present(dir, &kc));
	ASSERT_TRUE(present(dir, &ka));
	ASSERT_TRUE(present(dir, &kd));
	/* A table alone over the bound: not stored. */
	snprintf(max, sizeof(max), "%lld", one - 1);
	setenv("VIPROF_UNWIND_CACHE_MAX", max, 1);
	ASSERT_EQ(vp_cfi__cache_store(cd, &kc, built), -EFBIG);
	ASSERT_FALSE(present(dir, &kc));
	/* Suffixes, and what is not a size (the default, then). */
	uint64_t mb, as;
	setenv("VIPROF_UNWIND_CACHE_MAX", "64K", 1);
	setenv("VIPROF_UNWIND_CACHE_AGE", "12h", 1);
	vp_cfi__cache_bounds(&mb, &as);
	ASSERT_UEQ(mb, 65536);
	ASSERT_UEQ(as, 12 * 3600);
	setenv("VIPROF_UNWIND_CACHE_MAX", "lots", 1);
	setenv("VIPROF_UNWIND_CACHE_AGE", "-1", 1);
	vp_cfi__cache_bounds(&mb, &as);
	ASSERT_UEQ(mb, VP_CFI_CACHE_DEFAULT_MAX);
	ASSERT_UEQ(as, VP_CFI_CACHE_DEFAULT_AGE_S);
	unsetenv("VIPROF_UNWIND_CACHE_MAX");
	unsetenv("VIPROF_UNWIND_CACHE_AGE");
	close(cd);

	/* A directory others can write is not a cache; "off" turns it off. */
	ASSERT_EQ(chmod(dir, 0777), 0);
	ASSERT_EQ(vp_cfi__cache_open(), -EPERM);
	ASSERT_EQ(chmod(dir, 0700), 0);
	setenv("VIPROF_UNWIND_CACHE", "off", 1);
	ASSERT_TRUE(vp_cfi__cache_open() < 0);

	vp_cfi__free(built);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ASSERT_EQ(run_sh(cmd, 110), 0);
	printf("test-cfi-cache: ok\n");
	return 0;
}
