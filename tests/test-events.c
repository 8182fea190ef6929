/* Event names: the parse table (hardware, software, aliases, cache events, raw hex,
 * :u/:k modifiers, bad names with their messages), and the live check and default,
 * whose expected outcome follows what this machine's probe finds (PMU or not). */
#include <errno.h>
#include <linux/perf_event.h>

#include "hv-glue/events.h"
#include "hv-glue/hv_internal.h"
#include "hv-glue/probe.h"
#include "test.h"

static const struct {
	const char *in;
	uint32_t type;
	uint64_t config;
	bool software;
	const char *name;
} good[] = {
	{ "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, false, "cycles" },
	{ "cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, false, "cycles" },
	{ "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, false, "instructions" },
	{ "cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, false, "cache-misses" },
	{ "cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, false, "cache-references" },
	{ "branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, false, "branch-misses" },
	{ "branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, false, "branches" },
	{ "branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, false, "branches" },
	{ "ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES, false, "ref-cycles" },
	{ "cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, true, "cpu-clock" },
	{ "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, true, "task-clock" },
	{ "page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, true, "page-faults" },
	{ "faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, true, "page-faults" },
	{ "context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, true, "context-switches" },
	{ "cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, true, "context-switches" },
	{ "cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, true, "cpu-migrations" },
	{ "migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, true, "cpu-migrations" },
	{ "minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, true, "minor-faults" },
	{ "major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, true, "major-faults" },
	/* Generic cache events: id | op << 8 | result << 16, as perf's tables. */
	{ "L1-dcache-load-misses", PERF_TYPE_HW_CACHE, 0x10000, false, "L1-dcache-load-misses" },
	{ "L1-dcache-loads", PERF_TYPE_HW_CACHE, 0x00000, false, "L1-dcache-loads" },
	{ "L1-icache-load-misses", PERF_TYPE_HW_CACHE, 0x10001, false, "L1-icache-load-misses" },
	{ "LLC-load-misses", PERF_TYPE_HW_CACHE, 0x10002, false, "LLC-load-misses" },
	{ "LLC-store-misses", PERF_TYPE_HW_CACHE, 0x10102, false, "LLC-store-misses" },
	{ "dTLB-load-misses", PERF_TYPE_HW_CACHE, 0x10003, false, "dTLB-load-misses" },
	{ "iTLB-load-misses", PERF_TYPE_HW_CACHE, 0x10004, false, "iTLB-load-misses" },
	{ "branch-load-misses", PERF_TYPE_HW_CACHE, 0x10005, false, "branch-load-misses" },
	{ "node-prefetches", PERF_TYPE_HW_CACHE, 0x00206, false, "node-prefetches" },
	/* Raw, hex as perf takes it. */
	{ "r003c", PERF_TYPE_RAW, 0x3c, false, "r3c" },
	{ "r1A2b", PERF_TYPE_RAW, 0x1a2b, false, "r1a2b" },
	{ "r0x76", PERF_TYPE_RAW, 0x76, false, "r76" },
	{ "rffffffffffffffff", PERF_TYPE_RAW, 0xffffffffffffffffull, false, "rffffffffffffffff" },
};

static const struct {
	const char *in;
	int err;
	const char *msg1, *msg2;
} bad[] = {
	{ "cylces", -EINVAL, "'cylces'", "viprof probe" },
	{ "", -EINVAL, "empty", "cycles" },
	{ "cycles,,page-faults", -EINVAL, "empty", "commas" },
	{ "cycles,", -EINVAL, "empty", "commas" },
	{ "r", -EINVAL, "'r'", "perf name" },
	{ "rxyz", -EINVAL, "raw event 'rxyz'", "hex" },
	{ "r12g", -EINVAL, "raw event 'r12g'", "hex" },
	{ "r12345678901234567", -EINVAL, "raw", "16 hex digits" },
	{ "cycles:x", -EINVAL, "'cycles:x'", "modifier 'x'" },
	{ "cycles:", -EINVAL, "'cycles:'", "empty modifier" },
	{ "cpu-clock:up", -EINVAL, "'cpu-clock:up'", ":u (user only)" },
	{ "L1-dcache-load-miss", -EINVAL, "'L1-dcache-load-miss'", "unknown event" },
	{ "LLC", -EINVAL, "'LLC'", "unknown event" },
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	  -ENAMETOOLONG, "too long", "" },
};

static void test_parse_table(void)
{
	char err[512];
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct sampler_event ev[2];
		memset(ev, 0xaa, sizeof(ev));
		int n = vp_events__parse(good[i].in, ev, 2, err, sizeof(err));
		if (n != 1)
			FAIL("parse '%s' returned %d: %s", good[i].in, n, err);
		ASSERT_STREQ(err, "");
		ASSERT_EQ(ev[0].type, good[i].type);
		ASSERT_UEQ(ev[0].config, good[i].config);
		ASSERT_EQ(ev[0].software, good[i].software);
		ASSERT_STREQ(ev[0].name, good[i].name);
		ASSERT_FALSE(ev[0].exclude_kernel);
		ASSERT_FALSE(ev[0].exclude_user);
		/* Rates are the recorder's business. */
		ASSERT_UEQ(ev[0].period, 0);
		ASSERT_UEQ(ev[0].freq, 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sampler_event ev[VP_MAX_EVENTS];
		err[0] = '\0';
		int n = vp_events__parse(bad[i].in, ev, VP_MAX_EVENTS, err, sizeof(err));
		if (n != bad[i].err)
			FAIL("parse '%s' returned %d, expected %d (%s)", bad[i].in, n, bad[i].err, err);
		ASSERT_CONTAINS(err, bad[i].msg1);
		ASSERT_CONTAINS(err, bad[i].msg2);
		ASSERT_NULL(strchr(err, '\n'));
	}
}

static void test_lists_and_modifiers(void)
{
	char err[256];
	struct sampler_event ev[VP_MAX_EVENTS];
	ASSERT_EQ(vp_events__parse(" cycles , page-faults:u,cpu-clock:k,r3c:uk ", ev, VP_MAX_EVENTS, err, sizeof(err)), 4);
	ASSERT_STREQ(ev[0].name, "cycles");
	ASSERT_STREQ(ev[1].name, "page-faults:u");
	ASSERT_TRUE(ev[1].exclude_kernel);
	ASSERT_FALSE(ev[1].exclude_user);
	ASSERT_STREQ(ev[2].name, "cpu-clock:k");
	ASSERT_FALSE(ev[2].exclude_kernel);
	ASSERT_TRUE(ev[2].exclude_user);
	/* ":uk" is both modes, i.e. nothing excluded, as in perf. */
	ASSERT_STREQ(ev[3].name, "r3c:uk");
	ASSERT_EQ(ev[3].type, PERF_TYPE_RAW);
	ASSERT_FALSE(ev[3].exclude_kernel);
	ASSERT_FALSE(ev[3].exclude_user);
	ASSERT_TRUE(ev[0].type == PERF_TYPE_HARDWARE && ev[1].software && ev[2].software);

	/* Exactly max fits; one more is refused with the limit named. */
	ASSERT_EQ(vp_events__parse("cycles,cs", ev, 2, err, sizeof(err)), 2);
	ASSERT_EQ(vp_events__parse("cycles,cs,faults", ev, 2, err, sizeof(err)), -E2BIG);
	ASSERT_CONTAINS(err, "at most 2");
	/* No err buffer is allowed, and a NULL list is an error, not a crash. */
	ASSERT_EQ(vp_events__parse("cpu-clock", ev, 1, NULL, 0), 1);
	ASSERT_EQ(vp_events__parse(NULL, ev, 1, err, sizeof(err)), -EINVAL);
	/* A short err buffer truncates, never overflows. */
	char tiny[8];
	memset(tiny, 'x', sizeof(tiny));
	ASSERT_EQ(vp_events__parse("nope", ev, 1, tiny, 5), -EINVAL);
	ASSERT_EQ(strlen(tiny), 4);
	ASSERT_EQ(tiny[5], 'x');
}

/* Generated names from pieces of real ones: every result is either a parse whose
 * events all have names, or a negative errno with one line of explanation. */
static void test_generated(void)
{
	static const char *const pieces[] = { "cycles", "r", "3c", ":", "u", "k", ",", " ", "L1-dcache", "-load",
					      "-misses", "cs", "0x", "zz", "", "cpu-clock", "LLC", "-" };
	unsigned seed = 4242;
	for (int iter = 0; iter < 20000; iter++) {
		char list[160] = "";
		int parts = 1 + iter % 7;
		for (int i = 0; i < parts; i++) {
			seed = seed * 1103515245u + 12345u;
			strcat(list, pieces[(seed >> 16) % (sizeof(pieces) / sizeof(pieces[0]))]);
		}
		struct sampler_event ev[VP_MAX_EVENTS];
		char err[512];
		int n = vp_events__parse(list, ev, VP_MAX_EVENTS, err, sizeof(err));
		if (n > 0) {
			ASSERT_LE(n, VP_MAX_EVENTS);
			for (int i = 0; i < n; i++)
				ASSERT_GT(strlen(ev[i].name), 0);
		} else {
			ASSERT_LT(n, 0);
			if (!err[0] || strchr(err, '\n'))
				FAIL("parse of \"%s\" gave %d without a one-line message", list, n);
		}
	}
}

static void test_live(void)
{
	char err[512], why[512];
	struct sampler_event ev[2];
	ASSERT_EQ(vp_events__parse("cpu-clock", ev, 1, err, sizeof(err)), 1);
	int r = vp_events__check(&ev[0], err, sizeof(err));
	if ((r == -EACCES || r == -EPERM) && geteuid() != 0) {
		/* perf_event_paranoid <= 2 still allows user mode: the message must say how. */
		ASSERT_CONTAINS(err, "'cpu-clock'");
		ev[0].exclude_kernel = true;
		if (vp_events__check(&ev[0], NULL, 0) == 0)
			ASSERT_CONTAINS(err, "cpu-clock:u");
		SKIP("perf_event_open is not permitted for this user (%s); run as root", err);
	}
	if (r)
		FAIL("cpu-clock cannot be sampled: %s", err);

	/* What to expect from cycles follows the probe, so the test stays right on a
	 * machine with a PMU. */
	struct vp_probe *p = vp_probe__run();
	ASSERT_NOT_NULL(p);
	bool hw = vp_probe__hw_events(p);
	const char *hv = vp_probe__hypervisor(p);
	bool vm = strcmp(hv, "none") != 0;
	bool pmu_dev = vp_hv__pmu_device() != NULL;
	fprintf(stderr, "probe: hypervisor %s, PMU device %s, cycles %s\n", hv, pmu_dev ? "yes" : "no",
		hw ? "samples" : "does not sample");

	ASSERT_EQ(vp_events__parse("cycles,r003c", ev, 2, err, sizeof(err)), 2);
	r = vp_events__check(&ev[0], err, sizeof(err));
	if (hw) {
		ASSERT_EQ(r, 0);
		ASSERT_STREQ(err, "");
	} else {
		ASSERT_LT(r, 0);
		ASSERT_CONTAINS(err, "'cycles'");
		ASSERT_CONTAINS(err, "cpu-clock");
		ASSERT_CONTAINS(err, "available: ");
		ASSERT_CONTAINS(err, "try -e ");
		ASSERT_NULL(strchr(err, '\n'));
		if (vm && !pmu_dev) {
			ASSERT_CONTAINS(err, hv);
			ASSERT_CONTAINS(err, "no PMU");
		}
		/* Without a PMU, raw events cannot work either, and the message names them. */
		if (!pmu_dev) {
			ASSERT_LT(vp_events__check(&ev[1], err, sizeof(err)), 0);
			ASSERT_CONTAINS(err, "'r3c'");
		}
	}

	struct sampler_event def;
	ASSERT_OK(vp_events__default(&def, why, sizeof(why)));
	ASSERT_NULL(strchr(why, '\n'));
	if (hw) {
		ASSERT_STREQ(def.name, "cycles");
		ASSERT_EQ(def.type, PERF_TYPE_HARDWARE);
	} else {
		ASSERT_STREQ(def.name, "cpu-clock");
		ASSERT_EQ(def.type, PERF_TYPE_SOFTWARE);
		ASSERT_TRUE(def.software);
		ASSERT_CONTAINS(why, "cpu-clock");
		if (vm && !pmu_dev) {
			ASSERT_CONTAINS(why, hv);
			ASSERT_CONTAINS(why, "no PMU");
		}
	}
	/* The default can always be sampled: that is the point of it. */
	ASSERT_OK(vp_events__check(&def, err, sizeof(err)));
	vp_probe__free(p);
}

/* perf's per-event rate terms: the event keeps its plain name and gets its own rate. */
static void test_terms(void)
{
	char err[256];
	struct sampler_event ev[VP_MAX_EVENTS];
	ASSERT_EQ(vp_events__parse("cpu-clock/period=1000000/,page-faults/period=1/,cs/freq=99/u,cycles", ev,
				   VP_MAX_EVENTS, err, sizeof(err)), 4);
	ASSERT_STREQ(ev[0].name, "cpu-clock");
	ASSERT_UEQ(ev[0].period, 1000000);
	ASSERT_UEQ(ev[0].freq, 0);
	ASSERT_STREQ(ev[1].name, "page-faults");
	ASSERT_UEQ(ev[1].period, 1);
	ASSERT_STREQ(ev[2].name, "context-switches:u");
	ASSERT_UEQ(ev[2].freq, 99);
	ASSERT_UEQ(ev[2].period, 0);
	ASSERT_TRUE(ev[2].exclude_kernel);
	ASSERT_STREQ(ev[3].name, "cycles");
	ASSERT_UEQ(ev[3].period, 0);
	ASSERT_UEQ(ev[3].freq, 0);
	/* Several terms inside one pair of slashes do not split the list; ":k" after them. */
	ASSERT_EQ(vp_events__parse("faults/period=5,period=7/:k,task-clock", ev, VP_MAX_EVENTS, err, sizeof(err)), 2);
	ASSERT_STREQ(ev[0].name, "page-faults:k");
	ASSERT_UEQ(ev[0].period, 7);
	ASSERT_TRUE(ev[0].exclude_user);
	ASSERT_STREQ(ev[1].name, "task-clock");

	static const struct { const char *in, *msg; } bad[] = {
		{ "cpu-clock/period=1000", "no closing '/'" },
		{ "cpu-clock/period=0/", "positive whole number" },
		{ "cpu-clock/period=-5/", "positive whole number" },
		{ "cpu-clock/period=12x/", "positive whole number" },
		{ "cpu-clock/config=1/", "unknown term 'config=1'" },
		{ "cpu-clock/period=1,freq=2/", "both period and freq" },
		{ "/period=1/", "no name before" },
		{ "nosuch/period=1/", "unknown event 'nosuch'" },
		{ "cs/period=1/x", "unknown modifier 'x'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		int n = vp_events__parse(bad[i].in, ev, VP_MAX_EVENTS, err, sizeof(err));
		if (n != -EINVAL)
			FAIL("parse '%s' returned %d, expected -EINVAL (%s)", bad[i].in, n, err);
		ASSERT_CONTAINS(err, bad[i].msg);
	}
}

int main(void)
{
	test_parse_table();
	test_lists_and_modifiers();
	test_terms();
	test_generated();
	test_live();
	return 0;
}
