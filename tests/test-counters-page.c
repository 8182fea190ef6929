/* The user-page read of a counter (rdpmc under the page's seqlock, hv-glue/counters.c
 * vp_pc__read), on a page of the test's own with stand-ins for rdpmc and rdtsc: this
 * project's VMs have no PMU, so no other test reaches this path. It must read counter
 * index - 1, retry when the page changes while it is copied, use the page's time_offset,
 * leave software events (index 0) to read(), and take the read() path, not a SIGSEGV,
 * where rdpmc faults although the page allows it (a Xen PV guest keeps CR4.PCE clear). */
#include <linux/perf_event.h>
#include <signal.h>
#include <string.h>

#include "common/count_scale.h"
#include "hv-glue/hv_internal.h"
#include "test.h"

static struct perf_event_mmap_page page;
static uint32_t last_counter;
static int rdpmc_calls;
static int change_on_call;   /* the rdpmc call during which the "kernel" updates the page */
static uint64_t pmc_value = 1000, tsc_value = 500;

static uint64_t fake_rdpmc(uint32_t counter)
{
	last_counter = counter;
	if (++rdpmc_calls == change_on_call) {
		/* The event was scheduled out and in again: new base, new sequence. */
		page.offset = 70000;
		page.time_enabled = 9000;
		__atomic_store_n(&page.lock, page.lock + 2, __ATOMIC_RELEASE);
	}
	return pmc_value;
}

static uint64_t fake_rdtsc(void)
{
	return tsc_value;
}

static uint64_t faulting_rdpmc(uint32_t counter)
{
	(void)counter;
	rdpmc_calls++;
	raise(SIGSEGV);   /* what rdpmc does with CR4.PCE clear */
	return 0;
}

static void reset_page(void)
{
	memset(&page, 0, sizeof(page));
	page.lock = 4;
	page.index = 3;              /* counter 2 */
	page.offset = 50000;
	page.cap_user_rdpmc = 1;
	page.cap_user_time = 1;
	page.pmc_width = 48;
	page.time_enabled = 7000;
	page.time_running = 6000;
	page.time_offset = 100;
	page.time_mult = 1;
	page.time_shift = 0;
	rdpmc_calls = 0;
	change_on_call = 0;
	last_counter = 99;
}

int main(void)
{
	struct vp_count_snap s;

	vp_pc__hooks(fake_rdpmc, fake_rdtsc);
	/* The first read probes rdpmc once (one extra call); the counts below follow it. */
	reset_page();
	ASSERT_EQ(vp_pc__read(&page, &s), 1);
	ASSERT_EQ(rdpmc_calls, 2);

	/* The page's index is the counter + 1; the count is offset + the counter's value;
	 * the times run from the last update by time_offset + cycles * mult >> shift. */
	reset_page();
	ASSERT_EQ(vp_pc__read(&page, &s), 1);
	ASSERT_EQ(last_counter, 2);
	ASSERT_EQ(rdpmc_calls, 1);
	ASSERT_UEQ(s.count, 51000);
	ASSERT_UEQ(s.enabled, 7000 + 100 + 500);
	ASSERT_UEQ(s.running, 6000 + 100 + 500);

	/* A counter value with the top bit of its width set is negative (sign-extended). */
	reset_page();
	pmc_value = (1ull << 48) - 10;
	ASSERT_EQ(vp_pc__read(&page, &s), 1);
	ASSERT_UEQ(s.count, 50000 - 10);
	pmc_value = 1000;

	/* The page changed while it was being copied: the copy is taken again, and the
	 * reading is the new page's, not a mix. */
	reset_page();
	change_on_call = 1;
	ASSERT_EQ(vp_pc__read(&page, &s), 1);
	ASSERT_EQ(rdpmc_calls, 2);
	ASSERT_UEQ(s.count, 71000);
	ASSERT_UEQ(s.enabled, 9000 + 100 + 500);

	/* Not on a counter (a software event, or scheduled out): the kernel must be asked. */
	reset_page();
	page.index = 0;
	ASSERT_EQ(vp_pc__read(&page, &s), 0);
	ASSERT_EQ(rdpmc_calls, 0);
	reset_page();
	page.cap_user_rdpmc = 0;
	ASSERT_EQ(vp_pc__read(&page, &s), 0);
	ASSERT_EQ(rdpmc_calls, 0);

	/* rdpmc allowed by the page but faulting: read() from then on, and the process lives.
	 * The answer is kept: the second read does not try again. */
	struct sigaction before, after;
	ASSERT_OK(sigaction(SIGSEGV, NULL, &before));   /* SIG_DFL, or a sanitizer's */
	vp_pc__hooks(faulting_rdpmc, fake_rdtsc);
	reset_page();
	ASSERT_EQ(vp_pc__read(&page, &s), 0);
	ASSERT_EQ(rdpmc_calls, 1);   /* the probe's */
	ASSERT_EQ(vp_pc__read(&page, &s), 0);
	ASSERT_EQ(rdpmc_calls, 1);
	ASSERT_OK(sigaction(SIGSEGV, NULL, &after));    /* the probe put the old handler back */
	ASSERT_TRUE(after.sa_handler == before.sa_handler);

	vp_pc__hooks(NULL, NULL);
	printf("ok\n");
	return 0;
}
