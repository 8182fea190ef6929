/* Steal time in the profile: a synthetic session with cpu-clock SAMPLEs (1 ms period),
 * SWITCHes and STEALs on two vCPUs, whose answer is worked out by hand:
 *
 *   cpu0: STEAL 0 ms = 1000; 2 ms idle -> app; 6 ms app -> db; STEAL 10 ms = 1000 + 10 ms
 *         -> 10 ms over idle 2 / app 4 / db 4 ms of run time: idle 2, app 4, db 4 ms
 *   cpu1: STEAL 0 ms = 500; 5 ms app -> idle; STEAL 10 ms = 500 + 3 ms; STEAL 20 ms = +2 ms
 *         -> app 1.5, idle 1.5 ms, then idle 2 ms
 *   victims: app 5.5 ms (6 samples of 1 ms), db 4 ms (4), idle 5.5 ms (6); total 15 ms
 *
 * The steal hangs under each thread's most frequent cpu-clock stack (app: app_hot, 30
 * samples, not app_cold, 10). Checks the profile (frames, layers, ns, meta), the text
 * report's hypervisor line, the folded lines of --event steal, the --pid and --to
 * filters, and that a session whose steal never moved gets exactly one note. */
#define _GNU_SOURCE   /* memmem */
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "common/steal_clock.h"
#include "report/report.h"
#include "postproc/session.h"
#include "test.h"
#include "test-profile.h"
#include "test-profile-synth.h"
#include "test-run.h"

#define MS SYNTH_MS
#define K_APP_HOT 0xffffffff81002000ull
#define K_APP_COLD 0xffffffff81003000ull
#define K_DB_LOOP 0xffffffff81004000ull

static struct synth_session ss;

/* times cpu-clock samples of a two-frame kernel stack: do_syscall_64 -> leaf. */
static void w_sample(uint64_t t, uint32_t pid, uint32_t cpu, uint64_t leaf, int times)
{
	synth_ksample(&ss, t, &(struct synth_sample){ .pid = pid, .cpu = cpu, .period = MS, .leaf = leaf }, times);
}

/* A session of app (pid 100) and db (200) whose event 0 is cpu-clock (clock) or
 * page-faults. */
static void open_session(const char *dir, bool clock)
{
	synth_session_open(&ss, dir);
	synth_event(&ss, 0, clock ? "cpu-clock" : "page-faults", VP_EVENT_SOFTWARE | (clock ? VP_EVENT_TIME_UNITS : 0), 1,
		    clock ? MS : 1);
	synth_ksym(&ss, SYNTH_K_SYSCALL, "do_syscall_64");
	synth_ksym(&ss, K_APP_HOT, "app_hot");
	synth_ksym(&ss, K_APP_COLD, "app_cold");
	synth_ksym(&ss, K_DB_LOOP, "db_loop");
	synth_comm(&ss, 100, "app");
	synth_comm(&ss, 200, "db");
}

static void close_session(uint64_t end)
{
	synth_session_close(&ss, end, 60);
}

static void write_steal_session(const char *dir)
{
	open_session(dir, true);
	w_sample(3 * MS, 100, 0, K_APP_HOT, 30);
	w_sample(4 * MS, 100, 0, K_APP_COLD, 10);
	w_sample(7 * MS, 200, 0, K_DB_LOOP, 20);
	/* Per-CPU buffers drain independently: cpu1's records come before cpu0's. */
	synth_steal(&ss, 0, 1, 500);
	synth_switch(&ss, 5 * MS, 1, 100, 0);
	synth_steal(&ss, 10 * MS, 1, 500 + 3 * MS);
	synth_steal(&ss, 20 * MS, 1, 500 + 5 * MS);
	synth_steal(&ss, 0, 0, 1000);
	synth_switch(&ss, 2 * MS, 0, 0, 100);
	synth_switch(&ss, 6 * MS, 0, 100, 200);
	synth_steal(&ss, 10 * MS, 0, 1000 + 10 * MS);
	close_session(20 * MS);
}

static void write_zero_session(const char *dir)
{
	open_session(dir, true);
	w_sample(3 * MS, 100, 0, K_APP_HOT, 5);
	for (uint32_t cpu = 0; cpu < 2; cpu++) {
		synth_steal(&ss, 0, cpu, 7000 * MS);
		synth_switch(&ss, 2 * MS, cpu, 0, 100);
		synth_steal(&ss, 10 * MS, cpu, 7000 * MS);
	}
	close_session(10 * MS);
}

/* A VM without a steal clock (a PVM or nested guest): every snapshot's cumulative steal
 * is 0, so steal is unknown, and no view may print it as 0 (issue 34 item 2). */
static void write_noclock_session(const char *dir)
{
	open_session(dir, true);
	w_sample(3 * MS, 100, 0, K_APP_HOT, 5);
	for (uint32_t cpu = 0; cpu < 2; cpu++) {
		synth_steal(&ss, 0, cpu, 0);
		synth_switch(&ss, 2 * MS, cpu, 0, 100);
		synth_steal(&ss, 10 * MS, cpu, 0);
	}
	close_session(10 * MS);
}

/* No time event (page-faults only, so steal samples are whole milliseconds); a thread
 * that was never sampled (cron, pid 300) and a vCPU without any SWITCH record:
 *   cpu0: STEAL 0 = 0; 5 ms idle -> cron; STEAL 10 ms = 4 ms -> idle 2, cron 2 ms
 *   cpu1: STEAL 0 = 0; STEAL 10 ms = 1 ms, nobody said who ran -> unknown 1 ms */
static void write_other_session(const char *dir)
{
	open_session(dir, false);
	synth_comm(&ss, 300, "cron");
	synth_steal(&ss, 0, 0, 0);
	synth_switch(&ss, 5 * MS, 0, 0, 300);
	synth_steal(&ss, 10 * MS, 0, 4 * MS);
	synth_steal(&ss, 0, 1, 0);
	synth_steal(&ss, 10 * MS, 1, 1 * MS);
	close_session(10 * MS);
}

static struct vp_profile *load(const char *dir, const struct vp_session_opts *o)
{
	char err[512] = "";
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	int r = vp_session__load(dir, p, o, err, sizeof(err));
	if (r)
		FAIL("load %s: %d %s", dir, r, err);
	return p;
}

/* The steal stack of (pid): its weight, and its frames "a;b;c" with layers checked. */
static uint64_t steal_of(const struct vp_profile *p, uint32_t pid, char *frames, size_t len)
{
	int ev = tp_find_event(p, "steal");
	uint64_t found = 0;
	int n = 0;
	ASSERT_GE(ev, 0);
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (s->pid != pid || !s->weight[ev])
			continue;
		n++;
		const struct vp_frame *leaf = &p->frames[s->frames[s->nframes - 1]];
		ASSERT_STREQ(leaf->name, "[hypervisor: steal]");
		ASSERT_EQ(leaf->layer, VP_LAYER_HYPERVISOR);
		for (int e = 0; e < p->nevents; e++)
			if (e != ev)
				ASSERT_UEQ(s->samples[e], 0);  /* steal never counts as cpu-clock */
		frames[0] = '\0';
		for (uint32_t k = 0; k < s->nframes; k++)
			snprintf(frames + strlen(frames), len - strlen(frames), "%s%s", k ? ";" : "",
				 p->frames[s->frames[k]].name);
		found = s->weight[ev];
	}
	ASSERT_LE(n, 1);
	return found;
}

/* For pprof, a victim's steal is its stack by address with the steal leaf on top, a
 * location without mapping or address (issue 12: before, the whole stack went to pprof
 * by frame, at image-relative addresses in made-up mappings). app's steal: the steal
 * leaf, then app_hot and do_syscall_64 at the addresses sampled. */
static void check_steal_addresses(const struct vp_profile *p, int st)
{
	int found = 0;
	for (size_t i = 0; i < p->nloc_stacks; i++) {
		const struct vp_loc_stack *ls = &p->loc_stacks[i];
		if (!ls->weight[st])
			continue;
		ASSERT_GE(ls->nlocs, 1);
		const struct vp_location *leaf = &p->locations[ls->locs[0]];
		ASSERT_EQ(leaf->mapping, UINT32_MAX);
		ASSERT_UEQ(leaf->addr, 0);
		ASSERT_STREQ(p->frames[leaf->frames[0]].name, "[hypervisor: steal]");
		if (p->stacks[ls->stack].pid != 100)
			continue;
		found++;
		ASSERT_UEQ(ls->weight[st], 5500000);
		ASSERT_EQ(ls->nlocs, 3);
		ASSERT_UEQ(p->locations[ls->locs[1]].addr, K_APP_HOT + 0x10);
		ASSERT_NE(p->locations[ls->locs[1]].mapping, UINT32_MAX);
		ASSERT_UEQ(p->locations[ls->locs[2]].addr, SYNTH_K_SYSCALL + 0x20 - 1);   /* a return address */
	}
	ASSERT_EQ(found, 1);
}

static char *render(const struct vp_profile *p, int which, int sort_event)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ASSERT_NOT_NULL(f);
	struct vp_out o = { .f = f, .width = 200 };
	struct vp_report_opts ro = { .sort_event = sort_event, .threads = true };
	ASSERT_OK(which ? report_folded(p, &o, &ro) : report_text(p, NULL, &o, &ro));
	fclose(f);
	return buf;
}

/* 0 text --layers, 1 JSON, 2 pprof (gunzipped: its strings are then plain bytes). */
static char *render_as(const struct vp_profile *p, int which, size_t *outlen)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ASSERT_NOT_NULL(f);
	struct vp_out o = { .f = f, .width = 200 };
	struct vp_report_opts ro = { .layers = true };
	ASSERT_OK(which == 0 ? report_text(p, NULL, &o, &ro) : which == 1 ? report_json(p, NULL, &o, &ro)
									    : report_pprof(p, &o, &ro));
	fclose(f);
	*outlen = len;
	if (which != 2)
		return buf;
	size_t cap = 1 << 22;
	char *raw = calloc(1, cap);
	ASSERT_NOT_NULL(raw);
	z_stream z = { .next_in = (Bytef *)buf, .avail_in = (uInt)len, .next_out = (Bytef *)raw, .avail_out = (uInt)cap - 1 };
	ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
	ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
	*outlen = z.total_out;
	inflateEnd(&z);
	free(buf);
	return raw;
}

static bool has_bytes(const char *hay, size_t len, const char *needle)
{
	return memmem(hay, len, needle, strlen(needle)) != NULL;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

int main(void)
{
	char frames[512];
	char tmpl[] = "/tmp/test-steal-profile-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(tmpl));
	char dir[600], zdir[600], odir[600], ndir[600];
	snprintf(dir, sizeof(dir), "%s/steal", tmpl);
	snprintf(zdir, sizeof(zdir), "%s/zero", tmpl);
	snprintf(ndir, sizeof(ndir), "%s/noclock", tmpl);
	snprintf(odir, sizeof(odir), "%s/other", tmpl);
	write_steal_session(dir);
	write_zero_session(zdir);
	write_noclock_session(ndir);
	write_other_session(odir);

	/* The whole session. */
	struct vp_profile *p = load(dir, NULL);
	int st = tp_find_event(p, "steal"), cc = tp_find_event(p, "cpu-clock");
	ASSERT_EQ(cc, 0);
	ASSERT_GE(st, 0);
	ASSERT_STREQ(p->events[st].unit, "nanoseconds");
	ASSERT_UEQ(steal_of(p, 100, frames, sizeof(frames)), 5500000);
	ASSERT_STREQ(frames, "do_syscall_64;app_hot;[hypervisor: steal]");
	ASSERT_UEQ(steal_of(p, 200, frames, sizeof(frames)), 4000000);
	ASSERT_STREQ(frames, "do_syscall_64;db_loop;[hypervisor: steal]");
	ASSERT_UEQ(steal_of(p, 0, frames, sizeof(frames)), 5500000);
	ASSERT_STREQ(frames, "[idle];[hypervisor: steal]");
	ASSERT_STREQ(vp_profile__meta(p, "steal.cpu0"), "10000000");
	ASSERT_STREQ(vp_profile__meta(p, "steal.cpu1"), "5000000");
	ASSERT_STREQ(vp_profile__meta(p, "steal.total"), "15000000");
	check_steal_addresses(p, st);

	char *text = render(p, 0, cc);
	fputs(text, stderr);
	/* 15 ms of steal against 60 samples x 1 ms of cpu-clock. */
	ASSERT_CONTAINS(text, "hypervisor (steal) 15.0 ms  = 25.0% of sampled time (cpu-clock 60.0 ms)");
	ASSERT_CONTAINS(text, "# event: steal (nanoseconds), 16 samples");
	ASSERT_EQ(count(text, "steal: 0 ns"), 0);
	free(text);
	/* Ranked by steal, the hypervisor layer is the whole of the layer summary. */
	text = render(p, 0, st);
	ASSERT_CONTAINS(text, "# self by layer (steal):\n#   hypervisor   100.0%         16\n");
	free(text);

	char *folded = render(p, 1, st);
	ASSERT_STREQ(folded, "app;do_syscall_64_[k];app_hot_[k];[hypervisor: steal] 6\n"
			     "db;do_syscall_64_[k];db_loop_[k];[hypervisor: steal] 4\n"
			     "swapper;[idle]_[k];[hypervisor: steal] 6\n");
	free(folded);
	folded = render(p, 1, cc);
	ASSERT_EQ(count(folded, "[hypervisor: steal]"), 0);
	free(folded);
	vp_profile__free(p);

	/* --pid 200: only db's steal is drawn; the vCPU totals stay the VM's. */
	uint32_t pids[] = { 200 };
	struct vp_session_opts o = { .pids = pids, .npids = 1 };
	p = load(dir, &o);
	folded = render(p, 1, tp_find_event(p, "steal"));
	ASSERT_STREQ(folded, "db;do_syscall_64_[k];db_loop_[k];[hypervisor: steal] 4\n");
	free(folded);
	ASSERT_STREQ(vp_profile__meta(p, "steal.total"), "15000000");
	vp_profile__free(p);

	/* --comm app */
	struct vp_session_opts oc = { .comm = "app" };
	p = load(dir, &oc);
	folded = render(p, 1, tp_find_event(p, "steal"));
	ASSERT_STREQ(folded, "app;do_syscall_64_[k];app_hot_[k];[hypervisor: steal] 6\n");
	free(folded);
	vp_profile__free(p);

	/* --to 12 ms: cpu1's STEAL at 20 ms falls outside, so idle keeps 3.5 ms. */
	struct vp_session_opts ot = { .t_to = 0.012 };
	p = load(dir, &ot);
	ASSERT_UEQ(steal_of(p, 0, frames, sizeof(frames)), 3500000);
	ASSERT_UEQ(steal_of(p, 100, frames, sizeof(frames)), 5500000);
	ASSERT_STREQ(vp_profile__meta(p, "steal.cpu1"), "3000000");
	ASSERT_STREQ(vp_profile__meta(p, "steal.total"), "13000000");
	vp_profile__free(p);

	/* No steal at all: no steal event, and exactly one note. */
	p = load(zdir, NULL);
	ASSERT_EQ(tp_find_event(p, "steal"), -1);
	ASSERT_STREQ(vp_profile__meta(p, "steal.total"), "0");
	text = render(p, 0, 0);
	ASSERT_EQ(count(text, "steal: 0 ns on all vCPUs during the recording: the hypervisor took no time from this VM"), 1);
	ASSERT_EQ(count(text, "hypervisor (steal)"), 0);
	free(text);
	vp_profile__free(p);

	/* No steal clock ran: every view says "not measured", none a 0. */
	p = load(ndir, NULL);
	ASSERT_STREQ(vp_profile__meta(p, "steal.clock"), "none");
	ASSERT_NULL(vp_profile__meta(p, "steal.total"));
	ASSERT_TRUE(vp_profile__steal_unmeasured(p));
	for (int which = 0; which < 3; which++) {
		size_t len;
		char *out = render_as(p, which, &len);
		fprintf(stderr, "view %d:\n%.*s\n", which, which == 2 ? 0 : (int)len, out);
		ASSERT_TRUE(has_bytes(out, len, VP_STEAL_NOT_MEASURED));
		ASSERT_TRUE(!has_bytes(out, len, "took no time"));
		ASSERT_TRUE(!has_bytes(out, len, "steal 0"));
		ASSERT_TRUE(!has_bytes(out, len, "steal: 0"));
		ASSERT_TRUE(!has_bytes(out, len, "steal.total"));
		if (which == 0)
			ASSERT_CONTAINS(out, "#   hypervisor (steal) not measured (no steal clock)\n");
		free(out);
	}
	vp_profile__free(p);
	/* A session whose switch tracer made a "steal" event on a VM without a steal clock:
	 * the event's figures are not printed as 0 either (text header, JSON totals). */
	p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	int cc2 = vp_profile__add_event(p, "cpu-clock", "nanoseconds");
	ASSERT_GE(vp_profile__add_event(p, "steal", "nanoseconds"), 0);
	struct vp_frame vf = { .name = "app_hot", .image = "[kernel]", .build_id = "", .file = "", .layer = VP_LAYER_KERNEL };
	uint32_t fr = vp_profile__frame(p, &vf);
	ASSERT_OK(vp_profile__add(p, &fr, 1, 100, 100, "app", cc2, 5, 5000000));
	vp_profile__set_meta(p, "steal.clock", "none");
	for (int which = 0; which < 2; which++) {
		size_t len;
		char *out = render_as(p, which, &len);
		fprintf(stderr, "steal event, view %d:\n%.*s\n", which, (int)len, out);
		ASSERT_TRUE(has_bytes(out, len, VP_STEAL_NOT_MEASURED));
		ASSERT_TRUE(!has_bytes(out, len, "steal (nanoseconds), 0 samples"));
		ASSERT_TRUE(!has_bytes(out, len, "\"steal\":{\"samples\":0"));
		free(out);
	}
	vp_profile__free(p);

	/* The decision itself, from injected facts: /proc/stat since boot, the run queues' clock. */
	ASSERT_TRUE(!vp_steal_clock__ran(0, 0));
	ASSERT_TRUE(vp_steal_clock__ran(1, 0));
	ASSERT_TRUE(vp_steal_clock__ran(0, 1));

	/* Never-sampled and unknown victims; no time event to compare with. */
	p = load(odir, NULL);
	ASSERT_UEQ(steal_of(p, 300, frames, sizeof(frames)), 2000000);
	ASSERT_STREQ(frames, "[not sampled];[hypervisor: steal]");
	ASSERT_UEQ(steal_of(p, UINT32_MAX, frames, sizeof(frames)), 1000000);
	ASSERT_STREQ(frames, "[thread unknown: no switch records];[hypervisor: steal]");
	folded = render(p, 1, tp_find_event(p, "steal"));
	ASSERT_STREQ(folded, "[unknown];[thread unknown: no switch records];[hypervisor: steal] 1\n"
			     "cron;[not sampled];[hypervisor: steal] 2\n"
			     "swapper;[idle]_[k];[hypervisor: steal] 2\n");
	free(folded);
	text = render(p, 0, 0);
	ASSERT_CONTAINS(text, "#   hypervisor (steal) 5.0 ms\n");
	free(text);
	/* Loaded a second time into the same profile (merge): the meta adds up, and the
	 * steal stacks are not stacked on the first load's steal stacks. */
	char err[256] = "";
	ASSERT_OK(vp_session__load(odir, p, NULL, err, sizeof(err)));
	ASSERT_STREQ(vp_profile__meta(p, "steal.total"), "10000000");
	ASSERT_UEQ(steal_of(p, 300, frames, sizeof(frames)), 4000000);
	ASSERT_STREQ(frames, "[not sampled];[hypervisor: steal]");
	vp_profile__free(p);

	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
	ASSERT_OK(run_sh(cmd, 110));
	printf("test-steal-profile: ok\n");
	return 0;
}
