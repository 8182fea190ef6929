/* Hypervisor symbols (postproc/hvsyms.h) from a fixture ELF linked at Xen's text
 * address (tests/fixtures/xen/: every function sits at a fixed offset, so the
 * expected answers below come from the linker script, not from reading the ELF).
 * No live Xen host was available: see docs/hypervisor.md. argv[1] is the fixture. */
#include <errno.h>

#include "test.h"
#include "postproc/hvsyms.h"

#define XEN_TEXT 0xffff82d040200000ull

static void expect(struct vp_hvsyms *x, uint64_t addr, const char *name, uint64_t off)
{
	uint64_t got = UINT64_MAX;
	const char *n = vp_hvsyms__name(x, addr, &got);

	ASSERT_STREQ(n, name);
	ASSERT_UEQ(got, off);
}

int main(int argc, char **argv)
{
	char err[512] = "";
	struct vp_hvsyms *x;
	FILE *f;

	if (argc < 2)
		FAIL("usage: test-xen-hvsyms xen-fixture");
	x = vp_hvsyms__open(argv[1], err, sizeof(err));
	if (!x)
		FAIL("vp_hvsyms__open: %s", err);
	ASSERT_GE(vp_hvsyms__count(x), 6);
	expect(x, XEN_TEXT, "start_xen", 0);
	expect(x, XEN_TEXT + 0x100, "idle_loop", 0);
	expect(x, XEN_TEXT + 0x105, "idle_loop", 5);
	expect(x, XEN_TEXT + 0x200, "svm_vmexit_handler", 0);
	expect(x, XEN_TEXT + 0x20f, "svm_vmexit_handler", 0xf);
	expect(x, XEN_TEXT + 0x403, "do_softirq", 3);
	expect(x, XEN_TEXT + 0x500, "hvm_do_resume", 0);
	/* The padding after a sized function belongs to nobody; below the first symbol
	 * neither. */
	ASSERT_NULL(vp_hvsyms__name(x, XEN_TEXT + 0x2f0, NULL));
	ASSERT_NULL(vp_hvsyms__name(x, XEN_TEXT + 0x3ff, NULL));
	ASSERT_NULL(vp_hvsyms__name(x, XEN_TEXT - 1, NULL));
	ASSERT_NULL(vp_hvsyms__name(x, 0x401000, NULL));
	/* The range check that decides which samples get hypervisor symbols. */
	ASSERT_TRUE(vp_hvsyms__is_xen_addr(XEN_TEXT + 0x200));
	ASSERT_TRUE(vp_hvsyms__is_xen_addr(0xffff82d040000000ull));
	ASSERT_FALSE(vp_hvsyms__is_xen_addr(0xffffffff81000000ull));  /* Linux kernel text */
	ASSERT_FALSE(vp_hvsyms__is_xen_addr(0x00007f0000001000ull));  /* user space */
	vp_hvsyms__close(x);
	vp_hvsyms__close(NULL);

	/* Errors name the file and the fix. */
	ASSERT_NULL(vp_hvsyms__open("/nonexistent/xen-syms", err, sizeof(err)));
	ASSERT_EQ(errno, ENOENT);
	ASSERT_CONTAINS(err, "/nonexistent/xen-syms");
	f = fopen("test-xen-hvsyms.notelf", "w");
	ASSERT_NOT_NULL(f);
	fputs("this is xen.gz, not xen-syms\n", f);
	fclose(f);
	ASSERT_NULL(vp_hvsyms__open("test-xen-hvsyms.notelf", err, sizeof(err)));
	ASSERT_EQ(errno, EINVAL);
	ASSERT_CONTAINS(err, "not an ELF");
	printf("test-xen-hvsyms: ok\n");
	return 0;
}
