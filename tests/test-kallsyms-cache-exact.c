/* Kernel frames named from the per-boot cache are the frames a full read of
 * /proc/kallsyms names: for every text symbol of this kernel (start, middle, last
 * byte, and just past its end), the cached table answers with the same symbol, module,
 * address and size as the full table, reading /proc/kallsyms in full where only that
 * can answer (BPF programs, trampolines, a module's last symbol), and then keeps the
 * symbols already emitted as emitted. */
#include "recorder/kallsyms.h"
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int dfd;
static struct vp_kallsyms_key key;
static int reloads;

static struct vp_kallsyms *cached(void)
{
	struct vp_kallsyms *k = vp_kallsyms__cache_load(dfd, &key);
	if (!k)
		FAIL("cache load: %s", strerror(errno));
	reloads++;
	return k;
}

static bool tables_equal(const struct vp_kallsyms *a, const struct vp_kallsyms *b)
{
	if (vp_kallsyms__count(a) != vp_kallsyms__count(b))
		return false;
	for (size_t i = 0; i < vp_kallsyms__count(a); i++) {
		struct vp_kallsym_info x, y;
		vp_kallsyms__info(a, (long)i, &x);
		vp_kallsyms__info(b, (long)i, &y);
		if (x.addr != y.addr || x.size != y.size || strcmp(x.name, y.name) || strcmp(x.module, y.module))
			return false;
	}
	return true;
}

static int raced;

/* The cached table's answer for a against a full read's. Where the cached table reads
 * /proc/kallsyms in full to answer, the BPF programs of the moment (other recordings,
 * tests) are in its answer: the reference is then read again until it holds the same
 * programs. */
static int same(struct vp_kallsyms **full, struct vp_kallsyms **part, uint64_t a, int *upgrades)
{
	bool was_partial = vp_kallsyms__partial(*part);
	long j = vp_kallsyms__find(*part, a);
	bool upgraded = was_partial && !vp_kallsyms__partial(*part);
	if (upgraded) {
		(*upgrades)++;
		int tries = 0;
		while (!tables_equal(*full, *part) && tries++ < 20) {
			bool zero;
			vp_kallsyms__free(*full);
			*full = vp_kallsyms__load("/proc/kallsyms", &zero);
			ASSERT_NOT_NULL(*full);
		}
		if (!tables_equal(*full, *part)) {
			raced++;   /* BPF programs come and go faster than two reads here */
			goto next;
		}
	}
	long i = vp_kallsyms__find(*full, a);
	if ((i < 0) != (j < 0))
		FAIL("address %#llx: full read %ld, cache %ld", (unsigned long long)a, i, j);
	if (i >= 0) {
		struct vp_kallsym_info x, y;
		vp_kallsyms__info(*full, i, &x);
		vp_kallsyms__info(*part, j, &y);
		if (x.addr != y.addr || x.size != y.size || strcmp(x.name, y.name) || strcmp(x.module, y.module))
			FAIL("address %#llx: full read %s [%s] %#llx+%llu, cache %s [%s] %#llx+%llu%s",
			     (unsigned long long)a, x.name, x.module, (unsigned long long)x.addr,
			     (unsigned long long)x.size, y.name, y.module, (unsigned long long)y.addr,
			     (unsigned long long)y.size, upgraded ? " (after a full read)" : "");
	}
next:
	/* Read in full: a fresh cached table for the next address. */
	if (upgraded) {
		vp_kallsyms__free(*part);
		*part = cached();
	}
	return 0;
}

int main(void)
{
	REQUIRE_ROOT();
	bool zero = false;
	struct vp_kallsyms *full = vp_kallsyms__load("/proc/kallsyms", &zero);
	if (!full)
		SKIP("cannot read /proc/kallsyms: %s", strerror(errno));
	if (zero || !vp_kallsyms__count(full))
		SKIP("/proc/kallsyms shows no addresses here (kptr_restrict=2?)");
	char dir[] = "/tmp/startup-kexact.XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir));
	setenv("VIPROF_KSYM_CACHE", dir, 1);
	dfd = vp_kallsyms__cache_open();
	ASSERT_GE(dfd, 0);
	ASSERT_OK(vp_kallsyms__key(&key));
	ASSERT_OK(vp_kallsyms__cache_store(dfd, full, &key));
	struct vp_kallsyms *part = cached();
	ASSERT_TRUE(vp_kallsyms__partial(part));
	ASSERT_LE(vp_kallsyms__count(part), vp_kallsyms__count(full));

	/* Emitted marks survive the switch to a full read. */
	long first = vp_kallsyms__find(part, 0);   /* below everything: -1, and a full read */
	ASSERT_EQ(first, -1);
	ASSERT_FALSE(vp_kallsyms__partial(part));
	vp_kallsyms__free(part);
	part = cached();
	struct vp_kallsym_info fi;
	long mid = (long)vp_kallsyms__count(full) / 3;
	vp_kallsyms__info(full, mid, &fi);
	long pm = vp_kallsyms__find(part, fi.addr);
	ASSERT_GE(pm, 0);
	ASSERT_TRUE(vp_kallsyms__mark(part, pm));
	ASSERT_EQ(vp_kallsyms__find(part, ~0ull), -1);   /* past everything: a full read */
	ASSERT_FALSE(vp_kallsyms__partial(part));
	pm = vp_kallsyms__find(part, fi.addr);
	ASSERT_FALSE(vp_kallsyms__mark(part, pm));      /* still emitted */
	vp_kallsyms__free(part);
	part = cached();

	/* Every symbol: vmlinux and modules first (a cached table is answered from as long
	 * as it can), then the dynamic ones. */
	int upgrades = 0;
	size_t n = vp_kallsyms__count(full), checked = 0, dyn = 0;
	struct vp_kallsyms *cmp = vp_kallsyms__load("/proc/kallsyms", &zero);
	ASSERT_NOT_NULL(cmp);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			struct vp_kallsym_info x;
			vp_kallsyms__info(full, (long)i, &x);
			bool d = !strcmp(x.module, "bpf") || !strncmp(x.module, "__builtin__", 11);
			if (d != (pass == 1))
				continue;
			/* Each of these is a full read (dynamic, never cached): a few suffice. */
			if (d && dyn++ >= 3) {
				checked++;
				continue;
			}
			uint64_t as[] = { x.addr, x.addr + x.size / 2, x.addr + x.size - 1, x.addr + x.size };
			for (size_t t = 0; t < sizeof(as) / sizeof(as[0]); t++)
				same(&cmp, &part, as[t], &upgrades);
			checked++;
		}
	}
	printf("%zu symbols checked (%zu dynamic), %d full reads on the way (%d raced with BPF programs "
	       "loading), %d cache loads\n", checked, dyn, upgrades, raced, reloads);
	ASSERT_EQ(checked, n);
	ASSERT_LT(raced, upgrades > 0 ? upgrades : 1);
	vp_kallsyms__free(cmp);
	vp_kallsyms__free(part);
	vp_kallsyms__free(full);
	close(dfd);
	char f[128];
	snprintf(f, sizeof(f), "%s/kallsyms.v1", dir);
	unlink(f);
	rmdir(dir);
	return 0;
}
