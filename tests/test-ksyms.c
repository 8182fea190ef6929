/* The kernel symbol table of a session: unsorted input, duplicates, sizes, gaps,
 * modules, and addresses outside every symbol. */
#include "postproc/ksyms.h"
#include "test.h"

int main(void)
{
	struct vp_ksyms *k = vp_ksyms__new();
	ASSERT_NOT_NULL(k);
	ASSERT_NULL(vp_ksyms__find(k, 0xffffffff81000000ull));
	/* Out of order, as the recorder emits them (in order of first appearance). */
	ASSERT_OK(vp_ksyms__add(k, 0xffffffff81002000ull, 0x100, "", "schedule"));
	ASSERT_OK(vp_ksyms__add(k, 0xffffffff81001000ull, 0x80, "", "do_syscall_64"));
	ASSERT_OK(vp_ksyms__add(k, 0xffffffffc0100000ull, 0x40, "kvm", "kvm_vcpu_ioctl"));
	ASSERT_OK(vp_ksyms__add(k, 0xffffffff81002000ull, 0x100, "", "schedule"));  /* duplicate */
	ASSERT_OK(vp_ksyms__add(k, 0xffffffff81003000ull, 0, "", "asm_sysvec"));   /* no size */
	ASSERT_EQ(vp_ksyms__find(k, 0xffffffff81002010ull) != NULL, 1);
	ASSERT_EQ(vp_ksyms__count(k), 4);

	const struct vp_ksym_entry *e = vp_ksyms__find(k, 0xffffffff81001000ull);
	ASSERT_NOT_NULL(e);
	ASSERT_STREQ(e->name, "do_syscall_64");
	e = vp_ksyms__find(k, 0xffffffff8100107full);
	ASSERT_STREQ(e->name, "do_syscall_64");
	ASSERT_NULL(vp_ksyms__find(k, 0xffffffff81001080ull));  /* past its size, in a gap */
	ASSERT_NULL(vp_ksyms__find(k, 0xffffffff81000fffull));  /* below the first */
	e = vp_ksyms__find(k, 0xffffffff810020ffull);
	ASSERT_STREQ(e->name, "schedule");
	ASSERT_STREQ(e->module, "");
	e = vp_ksyms__find(k, 0xffffffffc0100004ull);
	ASSERT_STREQ(e->name, "kvm_vcpu_ioctl");
	ASSERT_STREQ(e->module, "kvm");
	ASSERT_UEQ(e->addr, 0xffffffffc0100000ull);
	/* Without a size a symbol reaches to the next one... */
	e = vp_ksyms__find(k, 0xffffffff81003800ull);
	ASSERT_NOT_NULL(e);
	ASSERT_STREQ(e->name, "asm_sysvec");
	/* Adding after a lookup re-sorts. */
	ASSERT_OK(vp_ksyms__add(k, 0xffffffff81000100ull, 0x10, "", "early"));
	ASSERT_STREQ(vp_ksyms__find(k, 0xffffffff81000105ull)->name, "early");
	ASSERT_STREQ(vp_ksyms__find(k, 0xffffffff81002001ull)->name, "schedule");
	/* ... but the last symbol does not swallow the rest of the address space. */
	ASSERT_NULL(vp_ksyms__find(k, 0xffffffffc0200000ull));
	vp_ksyms__free(k);
	vp_ksyms__free(NULL);
	return 0;
}
