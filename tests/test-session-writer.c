/* The recorder's own pieces, without a sampler: the kallsyms snapshot (sorting,
 * aliases, modules, sizes, hidden addresses), the session writer (directory rules,
 * --force, META/EVENT first, KSYM exactly once per symbol and before the sample that
 * needs it, or after it when the symbols were deferred, END and meta.json), and /proc synthesis of this very process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/session_format.h"
#include "recorder/kallsyms.h"
#include "recorder/procsynth.h"
#include "recorder/session_writer.h"
#include "postproc/steal.h"
#include "test.h"
#include "test-run.h"

static char tmp[] = "/tmp/vp-test-session-XXXXXX";

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fputs(text, f);
	ASSERT_OK(fclose(f));
}

/* A kallsyms excerpt out of order, with an alias, data symbols and a module. */
static const char *kallsyms_text =
	"ffffffff81000200 T func_b\n"
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T _text\n"
	"ffffffff81000100 t func_a\n"
	"ffffffff82000000 D some_data\n"
	"ffffffff81000300 W weak_c\n"
	"ffffffffc0001000 t mod_fn\t[mymod]\n"
	"ffffffffc0001400 T mod_fn2\t[mymod]\n";

static void test_ksyms(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/kallsyms", tmp);
	write_file(path, kallsyms_text);
	bool zero = true;
	struct vp_kallsyms *k = vp_kallsyms__load(path, &zero);
	ASSERT_NOT_NULL(k);
	ASSERT_FALSE(zero);
	ASSERT_EQ(vp_kallsyms__count(k), 7);   /* the D symbol is not text */

	struct vp_kallsym_info ki;
	long i = vp_kallsyms__find(k, 0xffffffff81000150ull);
	ASSERT_GE(i, 0);
	vp_kallsyms__info(k, i, &ki);
	ASSERT_STREQ(ki.name, "func_a");
	ASSERT_UEQ(ki.addr, 0xffffffff81000100ull);
	ASSERT_UEQ(ki.size, 0x100);
	ASSERT_STREQ(ki.module, "");

	/* Two names at one address: one of them, with the size to the next address. */
	i = vp_kallsyms__find(k, 0xffffffff81000010ull);
	ASSERT_GE(i, 0);
	vp_kallsyms__info(k, i, &ki);
	ASSERT_UEQ(ki.addr, 0xffffffff81000000ull);
	ASSERT_UEQ(ki.size, 0x100);
	ASSERT_TRUE(!strcmp(ki.name, "_stext") || !strcmp(ki.name, "_text"));

	i = vp_kallsyms__find(k, 0xffffffffc0001004ull);
	ASSERT_GE(i, 0);
	vp_kallsyms__info(k, i, &ki);
	ASSERT_STREQ(ki.name, "mod_fn");
	ASSERT_STREQ(ki.module, "mymod");
	ASSERT_UEQ(ki.size, 0x400);
	/* weak_c spans up to mod_fn: "size = next symbol - addr". */
	i = vp_kallsyms__find(k, 0xffffffff81000300ull);
	vp_kallsyms__info(k, i, &ki);
	ASSERT_STREQ(ki.name, "weak_c");
	ASSERT_UEQ(ki.size, 0xffffffffc0001000ull - 0xffffffff81000300ull);

	ASSERT_EQ(vp_kallsyms__find(k, 0xffffffff80ffffffull), -1);   /* below the first */
	ASSERT_EQ(vp_kallsyms__find(k, 0xffffffffc0001400ull + 1000000), -1); /* past the end */

	i = vp_kallsyms__find(k, 0xffffffff81000250ull);
	ASSERT_TRUE(vp_kallsyms__mark(k, i));
	ASSERT_FALSE(vp_kallsyms__mark(k, i));
	vp_kallsyms__free(k);

	/* kptr_restrict: every address reads 0; nothing must resolve. */
	write_file(path, "0000000000000000 T a\n0000000000000000 t b\n");
	k = vp_kallsyms__load(path, &zero);
	ASSERT_NOT_NULL(k);
	ASSERT_TRUE(zero);
	ASSERT_EQ(vp_kallsyms__find(k, 0), -1);
	vp_kallsyms__free(k);

	/* The real one, as root: addresses are visible and a known function resolves. */
	if (geteuid() == 0) {
		k = vp_kallsyms__load(NULL, &zero);
		ASSERT_NOT_NULL(k);
		ASSERT_FALSE(zero);
		ASSERT_GT(vp_kallsyms__count(k), 1000);
		/* Read again (the service's next interval): the same table, copied from the
		 * last read while the modules are unchanged, with emitted marks of its own. */
		long i2 = vp_kallsyms__find(k, vp_kallsyms__count(k) ? 0xffffffff81000000ull : 0);
		struct vp_kallsyms *k2 = vp_kallsyms__load(NULL, &zero);
		ASSERT_NOT_NULL(k2);
		ASSERT_FALSE(zero);
		ASSERT_EQ(vp_kallsyms__count(k2), vp_kallsyms__count(k));
		if (i2 >= 0) {
			ASSERT_TRUE(vp_kallsyms__mark(k, i2));
			ASSERT_TRUE(vp_kallsyms__mark(k2, i2));   /* not shared */
			struct vp_kallsym_info a, b;
			vp_kallsyms__info(k, i2, &a);
			vp_kallsyms__info(k2, i2, &b);
			ASSERT_EQ(a.addr, b.addr);
			ASSERT_STREQ(a.name, b.name);
		}
		vp_kallsyms__free(k);
		vp_kallsyms__free(k2);
	}
}

struct readback {
	int meta, events, samples, ksyms, mmaps, comms, steals, ends;
	int first_sample_index, last_meta_index, first_ksym_index;
	char ksym_names[8][64];
	uint64_t ksym_sizes[8];
	int bad_order;   /* a sample whose kernel symbol had not been emitted before it */
	struct vp_end end;
};

static void read_stream(const char *dir, struct readback *rb)
{
	char path[PATH_MAX], err[256];
	memset(rb, 0, sizeof(*rb));
	rb->first_sample_index = rb->first_ksym_index = -1;
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, dir);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	const struct vp_record *rec;
	int k, idx = 0;
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		switch (rec->type) {
		case VP_REC_META:
			rb->meta++;
			rb->last_meta_index = idx;
			break;
		case VP_REC_EVENT:
			rb->events++;
			break;
		case VP_REC_SAMPLE: {
			const struct vp_sample *s = vp_record_body(rec);
			if (rb->first_sample_index < 0)
				rb->first_sample_index = idx;
			/* Each kernel IP of these synthetic samples must have been announced. */
			if (s->nr_kernel && rb->ksyms == 0)
				rb->bad_order++;
			rb->samples++;
			break;
		}
		case VP_REC_KSYM: {
			const struct vp_ksym *ks = vp_record_body(rec);
			if (rb->first_ksym_index < 0)
				rb->first_ksym_index = idx;
			if (rb->ksyms < 8) {
				snprintf(rb->ksym_names[rb->ksyms], 64, "%s", ks->name);
				rb->ksym_sizes[rb->ksyms] = ks->size;
			}
			rb->ksyms++;
			break;
		}
		case VP_REC_MMAP: rb->mmaps++; break;
		case VP_REC_COMM: rb->comms++; break;
		case VP_REC_STEAL: rb->steals++; break;
		case VP_REC_END:
			rb->ends++;
			memcpy(&rb->end, vp_record_body(rec), sizeof(rb->end));
			break;
		}
		idx++;
	}
	ASSERT_EQ(k, 0);
	ASSERT_FALSE(cfile_reader__truncated(r));
	cfile_reader__close(r);
}

static int emit_sample(struct vp_session_writer *w, uint64_t t, int nk, const uint64_t *kips, uint64_t uip)
{
	uint64_t buf[64] = { 0 };
	struct vp_sample *s = (struct vp_sample *)buf;
	s->pid = s->tid = 42;
	s->mode = nk ? VP_MODE_KERNEL : VP_MODE_USER;
	s->period = 1001001;
	s->nr_kernel = (uint16_t)nk;
	s->nr_user = 1;
	for (int i = 0; i < nk; i++)
		s->ips[i] = kips[i];
	s->ips[nk] = uip;
	struct vp_sink sink = vp_session_writer__sink(w);
	return sink.emit(sink.ctx, VP_REC_SAMPLE, t, s, sizeof(*s) + (size_t)(nk + 1) * 8);
}

static void test_writer(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], err[512];
	snprintf(dir, sizeof(dir), "%s/sess", tmp);

	struct vp_session_writer *w = vp_session_writer__create(dir, false, 4096, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	snprintf(path, sizeof(path), "%s/kallsyms", tmp);
	write_file(path, kallsyms_text);
	vp_session_writer__set_ksyms(w, vp_kallsyms__load(path, NULL));
	snprintf(path, sizeof(path), "%s/jit", dir);
	struct stat st;
	ASSERT_OK(stat(path, &st));
	/* Private: a JVM of another user is let in by an ACL only when it is attached. */
	ASSERT_EQ(st.st_mode & 0777, 0700);
	ASSERT_OK(stat(dir, &st));
	ASSERT_EQ(st.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/stream.vps", dir);
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 0777, 0600);

	ASSERT_OK(vp_session_writer__meta(w, "hostname", "h\"1"));
	ASSERT_OK(vp_session_writer__meta(w, "clock", "CLOCK_MONOTONIC"));
	struct sampler_event ev = { .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK, .freq = 999,
				    .software = true, .name = "cpu-clock" };
	ASSERT_OK(vp_session_writer__event(w, &ev));

	const uint64_t a[] = { 0xffffffff81000110ull, 0xffffffff81000210ull, 0xffffffffffffff80ull /* context marker */ };
	const uint64_t b[] = { 0xffffffff81000120ull, 0xffffffffc0001010ull };
	const int n = 2000;   /* several 4 KiB chunks */
	for (int i = 0; i < n; i++) {
		if (i % 3 == 0)
			ASSERT_OK(emit_sample(w, 1000 + (uint64_t)i, 3, a, 0x401000));
		else if (i % 3 == 1)
			ASSERT_OK(emit_sample(w, 1000 + (uint64_t)i, 2, b, 0x401000));
		else
			ASSERT_OK(emit_sample(w, 1000 + (uint64_t)i, 0, NULL, 0x401000));
	}
	/* A sample whose body is shorter than its frame counts say is refused. */
	uint64_t bad[8] = { 0 };
	((struct vp_sample *)bad)->nr_user = 100;
	struct vp_sink sink = vp_session_writer__sink(w);
	ASSERT_EQ(sink.emit(sink.ctx, VP_REC_SAMPLE, 1, bad, sizeof(bad)), -EINVAL);

	uint64_t steal[2] = { 5, 7 };
	ASSERT_OK(vp_session_writer__steal(w, 5000, steal, 2));
	steal[0] = 105;
	ASSERT_OK(vp_session_writer__steal(w, 6000, steal, 2));
	ASSERT_EQ(vp_session_writer__samples(w), n);
	ASSERT_EQ(vp_session_writer__ksyms_emitted(w), 3);   /* func_a, func_b, mod_fn */

	struct vp_end end = { .lost = 3, .duration_ns = 2500000000ull, .exit_status = 4 };
	ASSERT_OK(vp_session_writer__finish(w, 7000, &end, err, sizeof(err)));
	ASSERT_GT(vp_session_writer__bytes(w), 64);
	vp_session_writer__free(w);

	struct readback rb;
	read_stream(dir, &rb);
	ASSERT_EQ(rb.meta, 2);
	ASSERT_EQ(rb.events, 1);
	ASSERT_EQ(rb.samples, n);
	ASSERT_EQ(rb.ksyms, 3);
	ASSERT_EQ(rb.bad_order, 0);
	ASSERT_LT(rb.last_meta_index, rb.first_ksym_index);
	ASSERT_LT(rb.first_ksym_index, rb.first_sample_index);
	ASSERT_STREQ(rb.ksym_names[0], "func_a");
	ASSERT_STREQ(rb.ksym_names[1], "func_b");
	ASSERT_STREQ(rb.ksym_names[2], "mod_fn");
	ASSERT_UEQ(rb.ksym_sizes[0], 0x100);
	ASSERT_EQ(rb.steals, 4);
	ASSERT_EQ(rb.ends, 1);
	ASSERT_UEQ(rb.end.samples, (uint64_t)n);
	ASSERT_UEQ(rb.end.lost, 3);
	ASSERT_EQ(rb.end.exit_status, 4);

	/* meta.json: valid enough to grep, with the counts and the escaped value. */
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	FILE *f = fopen(path, "r");
	ASSERT_NOT_NULL(f);
	char json[8192];
	size_t len = fread(json, 1, sizeof(json) - 1, f);
	json[len] = '\0';
	fclose(f);
	ASSERT_CONTAINS(json, "\"samples\": 2000,");
	ASSERT_CONTAINS(json, "\"lost\": 3,");
	ASSERT_CONTAINS(json, "\"hostname\": \"h\\\"1\"");
	ASSERT_CONTAINS(json, "\"events\": [\"cpu-clock\"]");
	ASSERT_CONTAINS(json, "\"steal_ns_start\": [5, 7]");
	ASSERT_CONTAINS(json, "\"steal_ns_end\": [105, 7]");
	ASSERT_CONTAINS(json, "\"duration_s\": 2.500");

	/* An existing non-empty directory is refused without --force ... */
	w = vp_session_writer__create(dir, false, 0, err, sizeof(err));
	ASSERT_NULL(w);
	ASSERT_EQ(errno, EEXIST);
	ASSERT_CONTAINS(err, "--force");
	/* ... and kept as DIR.old with it, replacing an older DIR.old. */
	for (int round = 0; round < 2; round++) {
		w = vp_session_writer__create(dir, true, 0, err, sizeof(err));
		if (!w)
			FAIL("round %d: %s", round, err);
		vp_session_writer__free(w);
		snprintf(path, sizeof(path), "%s.old/" VP_SESSION_STREAM, dir);
		ASSERT_OK(stat(path, &st));
	}
	/* After the first --force, DIR.old holds the full session; after the second, the
	 * stream of the (unfinished) first replacement. */
	snprintf(path, sizeof(path), "%s.old/meta.json", dir);
	ASSERT_NE(stat(path, &st), 0);
	/* An existing empty directory is simply used. */
	snprintf(path, sizeof(path), "%s/empty", tmp);
	ASSERT_OK(mkdir(path, 0755));
	w = vp_session_writer__create(path, false, 0, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	vp_session_writer__free(w);
}

/* A writer killed before finish(): everything flushed is readable, no END. */
/* Context switches reach the stream only for intervals in which that vCPU's steal grew,
 * preceded by a switch-to-self naming who ran at the interval's start; attribution over
 * what is kept must equal attribution over every switch. */
struct charge { uint32_t cpu, tid; uint64_t ns; };
static struct charge charges[16];
static int ncharges;

static void on_charge(void *ctx, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns)
{
	if (ncharges < 16)
		charges[ncharges++] = (struct charge){ cpu, tid, ns };
}

static uint64_t charged(uint32_t cpu, uint32_t tid)
{
	uint64_t ns = 0;
	for (int i = 0; i < ncharges; i++)
		if (charges[i].cpu == cpu && charges[i].tid == tid)
			ns += charges[i].ns;
	return ns;
}

/* Kernel symbols read on a thread (vp_kallsyms_loader) and given to the writer after
 * samples that need them: each needed symbol still gets exactly one KSYM before END,
 * written when the table arrives; samples after that are served directly. */
static void test_deferred_ksyms(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], err[512];
	snprintf(dir, sizeof(dir), "%s/deferred", tmp);
	snprintf(path, sizeof(path), "%s/kallsyms", tmp);
	write_file(path, kallsyms_text);

	struct vp_kallsyms_loader *l = vp_kallsyms_loader__start(path);
	ASSERT_NOT_NULL(l);
	struct vp_session_writer *w = vp_session_writer__create(dir, false, 4096, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	vp_session_writer__defer_ksyms(w);
	const uint64_t a[] = { 0xffffffff81000110ull, 0xffffffff81000210ull };
	const uint64_t b[] = { 0xffffffff81000120ull, 0xffffffffc0001010ull };
	for (int i = 0; i < 100; i++)
		ASSERT_OK(emit_sample(w, 1000 + (uint64_t)i, 2, a, 0x401000));
	ASSERT_EQ(vp_session_writer__ksyms_emitted(w), 0);   /* nothing to name them with yet */

	bool zero = true;
	struct vp_kallsyms *k = vp_kallsyms_loader__join(l, &zero);
	ASSERT_NOT_NULL(k);
	ASSERT_FALSE(zero);
	vp_session_writer__set_ksyms(w, k);
	ASSERT_EQ(vp_session_writer__ksyms_emitted(w), 2);   /* func_a, func_b, once each */
	for (int i = 0; i < 100; i++)
		ASSERT_OK(emit_sample(w, 2000 + (uint64_t)i, 2, b, 0x401000));
	ASSERT_EQ(vp_session_writer__ksyms_emitted(w), 3);   /* + mod_fn; func_a is known */

	struct vp_end end = { 0 };
	ASSERT_OK(vp_session_writer__finish(w, 3000, &end, err, sizeof(err)));
	vp_session_writer__free(w);
	struct readback rb;
	read_stream(dir, &rb);
	ASSERT_EQ(rb.samples, 200);
	ASSERT_EQ(rb.ksyms, 3);
	ASSERT_EQ(rb.ends, 1);
	ASSERT_STREQ(rb.ksym_names[0], "func_a");
	ASSERT_STREQ(rb.ksym_names[1], "func_b");
	ASSERT_STREQ(rb.ksym_names[2], "mod_fn");

	/* A loader of a file that is not there reports it at the join, with errno. */
	snprintf(path, sizeof(path), "%s/no-such-kallsyms", tmp);
	l = vp_kallsyms_loader__start(path);
	ASSERT_NOT_NULL(l);
	errno = 0;
	ASSERT_NULL(vp_kallsyms_loader__join(l, NULL));
	ASSERT_EQ(errno, ENOENT);
	ASSERT_NULL(vp_kallsyms_loader__join(NULL, NULL));
}

static void test_switch_filter(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], err[512];
	snprintf(dir, sizeof(dir), "%s/switches", tmp);
	struct vp_session_writer *w = vp_session_writer__create(dir, false, 0, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	struct vp_sink sink = vp_session_writer__sink(w);
#define SW(t, c, pt, nt) do { struct vp_switch _s = { .cpu = (c), .prev_pid = (pt), .prev_tid = (pt), \
		.next_pid = (nt), .next_tid = (nt) }; ASSERT_OK(sink.emit(sink.ctx, VP_REC_SWITCH, (t), &_s, sizeof(_s))); } while (0)
	uint64_t steal[2] = { 100, 200 };
	ASSERT_OK(vp_session_writer__steal(w, 1000, steal, 2));
	SW(1100, 0, 0, 11);
	SW(1200, 0, 11, 21);
	SW(1150, 1, 0, 31);
	steal[0] = 150;            /* cpu0 lost 50 ns in [1000, 2000): keep its switches */
	ASSERT_OK(vp_session_writer__steal(w, 2000, steal, 2));
	SW(2100, 0, 21, 0);
	SW(2200, 1, 31, 41);
	steal[1] = 260;            /* cpu1 lost 60 ns in [2000, 3000) */
	ASSERT_OK(vp_session_writer__steal(w, 3000, steal, 2));
#undef SW
	struct vp_end end = { 0 };
	ASSERT_OK(vp_session_writer__finish(w, 3500, &end, err, sizeof(err)));
	vp_session_writer__free(w);

	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, dir);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	struct vp_steal_acct *a = vp_steal_acct__new();
	ASSERT_NOT_NULL(a);
	const struct vp_record *rec;
	int k, nsw = 0;
	uint64_t sw_time[8];
	uint32_t sw_cpu[8], sw_prev[8], sw_next[8];
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		if (rec->type == VP_REC_SWITCH) {
			const struct vp_switch *x = vp_record_body(rec);
			if (nsw < 8) {
				sw_time[nsw] = rec->time;
				sw_cpu[nsw] = x->cpu;
				sw_prev[nsw] = x->prev_tid;
				sw_next[nsw] = x->next_tid;
			}
			nsw++;
			vp_steal_acct__switch(a, rec->time, x);
		} else if (rec->type == VP_REC_STEAL) {
			vp_steal_acct__steal(a, rec->time, vp_record_body(rec));
		}
	}
	ASSERT_EQ(k, 0);
	cfile_reader__close(r);
	/* cpu0's two switches of the first interval; cpu1's self-switch at 2000 and its
	 * switch at 2200. cpu1 at 1150 and cpu0 at 2100 fell in intervals without steal. */
	ASSERT_EQ(nsw, 4);
	ASSERT_UEQ(sw_time[0], 1100); ASSERT_EQ(sw_cpu[0], 0); ASSERT_EQ(sw_next[0], 11);
	ASSERT_UEQ(sw_time[1], 1200); ASSERT_EQ(sw_cpu[1], 0); ASSERT_EQ(sw_next[1], 21);
	ASSERT_UEQ(sw_time[2], 2000); ASSERT_EQ(sw_cpu[2], 1); ASSERT_EQ(sw_prev[2], 31); ASSERT_EQ(sw_next[2], 31);
	ASSERT_UEQ(sw_time[3], 2200); ASSERT_EQ(sw_cpu[3], 1); ASSERT_EQ(sw_next[3], 41);
	/* The same charges as with every switch: cpu0's 50 ns over idle 100, tid 11 100,
	 * tid 21 800 of [1000, 2000); cpu1's 60 ns over tid 31 200, tid 41 800. */
	ASSERT_OK(vp_steal_acct__finish(a, on_charge, NULL));
	vp_steal_acct__free(a);
	ASSERT_UEQ(charged(0, 0) + charged(0, 11) + charged(0, 21), 50);
	ASSERT_UEQ(charged(0, 21), 40);
	ASSERT_UEQ(charged(1, 31), 12);
	ASSERT_UEQ(charged(1, 41), 48);
}

static void test_unfinished(void)
{
	char dir[PATH_MAX], err[512];
	snprintf(dir, sizeof(dir), "%s/unfinished", tmp);
	struct vp_session_writer *w = vp_session_writer__create(dir, false, 0, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	ASSERT_OK(vp_session_writer__meta(w, "k", "v"));
	for (int i = 0; i < 10; i++)
		ASSERT_OK(emit_sample(w, (uint64_t)i, 0, NULL, 0x1000));
	ASSERT_OK(vp_session_writer__maybe_flush(w, 2000000000ull, 1000000000ull));
	ASSERT_OK(emit_sample(w, 11, 0, NULL, 0x1000));
	/* Not flushed yet: the timer has not run out. */
	ASSERT_OK(vp_session_writer__maybe_flush(w, 2500000000ull, 1000000000ull));
	struct readback rb;
	read_stream(dir, &rb);
	ASSERT_EQ(rb.samples, 10);
	ASSERT_EQ(rb.ends, 0);
	vp_session_writer__free(w);
}

struct synth_count {
	bool all;   /* every process, not just ours */
	int comms, mmaps, self_exe, with_build_id;
	char exe[PATH_MAX];
};

static int count_emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct synth_count *c = ctx;
	if (type == VP_REC_COMM) {
		const struct vp_comm *cm = body;
		ASSERT_EQ(len, sizeof(*cm));
		if (!c->all)
			ASSERT_EQ(cm->pid, getpid());
		c->comms++;
	} else if (type == VP_REC_MMAP) {
		const struct vp_mmap *m = body;
		ASSERT_GT(len, offsetof(struct vp_mmap, filename));
		ASSERT_EQ(((const char *)body)[len - 1], '\0');
		ASSERT_EQ(m->synthesized, 1);
		ASSERT_TRUE(m->prot & 0x4);   /* PROT_EXEC: only code is synthesized */
		if (!c->all && !strcmp(m->filename, c->exe)) {
			c->self_exe++;
			ASSERT_GT(m->ino, 0);
			if (m->build_id_size)
				c->with_build_id++;
		}
		c->mmaps++;
	}
	return 0;
}

static void test_procsynth(void)
{
	struct synth_count c = { 0 };
	ASSERT_GT(readlink("/proc/self/exe", c.exe, sizeof(c.exe) - 1), 0);
	struct vp_sink sink = { .emit = count_emit, .ctx = &c };
	struct vp_procsynth *ps = vp_procsynth__new();
	ASSERT_NOT_NULL(ps);
	ASSERT_OK(vp_procsynth__process(ps, getpid(), 1, &sink));
	ASSERT_EQ(c.comms, 1);
	ASSERT_GE(c.mmaps, 2);        /* the test itself and libc at least */
	ASSERT_EQ(c.self_exe, 1);     /* one executable segment */

	/* Our own build-id as the ELF note says, when the toolchain wrote one. */
	uint8_t id[20];
	int n = vp_elf_build_id(c.exe, id, sizeof(id));
	if (n > 0)
		ASSERT_EQ(c.with_build_id, 1);
	else
		ASSERT_EQ(n, -ENOENT);
	ASSERT_EQ(vp_elf_build_id("/proc/self/status", id, sizeof(id)), -ENOEXEC);

	/* A pid that does not exist is -ESRCH, not a failure of the walk. */
	ASSERT_EQ(vp_procsynth__process(ps, 0x3fffff, 1, &sink), -ESRCH);
	struct synth_count all = { .all = true };
	sink.ctx = &all;
	int np = vp_procsynth__all(ps, 1, &sink);
	ASSERT_GE(np, 2);   /* init and us at least */
	ASSERT_GE(all.comms, np);
	vp_procsynth__free(ps);
}

int main(void)
{
	ASSERT_NOT_NULL(mkdtemp(tmp));
	test_ksyms();
	test_writer();
	test_deferred_ksyms();
	test_unfinished();
	test_switch_filter();
	test_procsynth();
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmp);
	printf("ok\n");
	return 0;
}
