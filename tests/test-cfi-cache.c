/* The unwind-rule cache (recorder/cfi.h): a table stored and loaded back is the same table
 * (rules, base, segments, source); a changed file identity misses; a damaged entry (a
 * flipped rule byte, a cut file, unsorted rules under a fixed CRC) is refused and
 * replaced on the next store; a directory others may write is not used. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "recorder/cfi.h"
#include "test.h"

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
	FILE *p = popen(cmd, "r");
	ASSERT_NOT_NULL(p);
	char name[256] = "";
	ASSERT_NOT_NULL(fgets(name, sizeof(name), p));
	pclose(p);
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

	/* A directory others can write is not a cache; "off" turns it off. */
	ASSERT_EQ(chmod(dir, 0777), 0);
	ASSERT_EQ(vp_cfi__cache_open(), -EPERM);
	ASSERT_EQ(chmod(dir, 0700), 0);
	setenv("VIPROF_UNWIND_CACHE", "off", 1);
	ASSERT_TRUE(vp_cfi__cache_open() < 0);

	vp_cfi__free(built);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ASSERT_EQ(system(cmd), 0);
	printf("test-cfi-cache: ok\n");
	return 0;
}
