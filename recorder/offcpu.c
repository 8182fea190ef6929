/* The recorder's hook for the context-switch tracer: see offcpu.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "recorder/offcpu.h"
#include <linux/types.h>
#include "sampler-kernel/sched.h"        /* VPS_CNT_* */
#include "sampler-kernel/sched_tracer.h"

int record_sched__start(struct sampler_config *cfg, bool off_cpu, bool quiet, FILE *log,
			struct vp_sched **out, char *err, size_t errlen)
{
	struct vp_sched_config sc = {
		.target = cfg->target, .pids = cfg->pids, .nr_pids = cfg->nr_pids, .off_cpu = off_cpu,
		.first_event = (uint32_t)cfg->nr_events, .sink = cfg->sink,
		.filter_uid = cfg->filter_uid, .only_uid = cfg->only_uid, .user_only = sampler_config__user_only(cfg),
		.windowed = true,
	};
	char why[512] = "";

	/* Tests of the proportional split on a live session (every switch recorded) ask
	 * for it without the tracer; off-CPU time needs the tracer whatever is asked. */
	if (!off_cpu && getenv("VIPROF_PROPORTIONAL_STEAL")) {
		*out = NULL;
		return 0;
	}
	*out = vp_sched__start(&sc, off_cpu ? err : why, off_cpu ? errlen : sizeof(why));
	if (*out) {
		/* With -g, stacks at switch-out are walked like the sampler's, once it has
		 * loaded its walker. */
		vp_sched__hook(*out, cfg);
		return 0;
	}
	if (off_cpu)
		return errno ? -errno : -EINVAL;
	/* Exact steal is an improvement, not a requirement: say why it is missing (a user
	 * without BPF was told what they miss, and how to get it, by 'viprof record'). */
	if (!quiet && !(errno == EPERM && geteuid() != 0))
		fprintf(log ? log : stderr, "viprof: steal is attributed proportionally (%s)\n", why);
	return 0;
}

void record_sched__window(struct vp_sched *s, uint64_t start, uint64_t end)
{
	vp_sched__window(s, start, end);
}

int record_sched__poll(struct vp_sched *s, uint64_t now)
{
	int n = vp_sched__poll(s, now);

	return n < 0 ? n : 0;
}

int record_sched__rotated(struct vp_sched *s)
{
	return vp_sched__emit_events(s);
}

int record_sched__finish(struct vp_sched *s, bool quiet, FILE *log)
{
	struct vp_sched_stats st;
	int err;

	if (!s)
		return 0;
	const char *fp = vp_sched__walker(s);

	err = vp_sched__stop(s);
	vp_sched__stats(s, &st);
	if (fp && !quiet)
		fprintf(log ? log : stderr, "viprof: switch tracer: user stacks at switch-out followed frame pointers: %s\n", fp);
	else if (!quiet && st.walks)
		fprintf(log ? log : stderr, "viprof: switch tracer: %llu user stacks walked at switch-out (%llu reused "
				"unchanged), %.2f us each (walked %.2f us, reused %.2f us)\n",
			(unsigned long long)st.walks, (unsigned long long)st.reused, (double)st.walk_ns / 1e3 / (double)st.walks,
			st.walks > st.reused ? (double)(st.walk_ns - st.reused_ns) / 1e3 / (double)(st.walks - st.reused) : 0.0,
			st.reused ? (double)st.reused_ns / 1e3 / (double)st.reused : 0.0);
	if (!quiet && st.walks && getenv("VIPROF_DEBUG_TIMING")) {
		/* Where the switch-out walks' time goes (bench/cost-breakdown.sh). */
		unsigned long long pre = vp_sched__counter(s, VPS_CNT_WALK_PREEMPT),
				   pre_ns = vp_sched__counter(s, VPS_CNT_WALK_PREEMPT_NS),
				   frames = vp_sched__counter(s, VPS_CNT_WALK_FRAMES),
				   walked = st.walks - st.reused;

		fprintf(log ? log : stderr, "viprof: switch tracer: walk breakdown: %llu at preemptions reused, %llu walked (%.2f us each), "
				"blocks walked: %llu with nothing kept, %llu other registers, %llu a word changed; "
				"%.1f frames per walk (%.0f ns per frame); checks that passed: %.1f words, %.0f stack bytes each\n",
			(unsigned long long)vp_sched__counter(s, VPS_CNT_REUSED_PREEMPT), pre, pre ? (double)pre_ns / 1e3 / (double)pre : 0.0, (unsigned long long)vp_sched__counter(s, VPS_CNT_MISS_NOLAST),
			(unsigned long long)vp_sched__counter(s, VPS_CNT_MISS_REGS), (unsigned long long)vp_sched__counter(s, VPS_CNT_MISS_WORDS),
			walked ? (double)frames / (double)walked : 0.0,
			frames ? (double)(st.walk_ns - st.reused_ns) / (double)frames : 0.0,
			st.reused ? (double)vp_sched__counter(s, VPS_CNT_CHECK_WORDS) / (double)st.reused : 0.0,
			st.reused ? (double)vp_sched__counter(s, VPS_CNT_CHECK_BYTES) / (double)st.reused : 0.0);
	}
	if (!quiet)
		fprintf(log ? log : stderr, "viprof: switch tracer: %llu switches, %llu records (%llu bytes)\n",
			(unsigned long long)st.switches, (unsigned long long)st.records, (unsigned long long)st.bytes);
	if (st.ustack_full)
		fprintf(log ? log : stderr, "viprof: warning: %llu off-CPU intervals lost their user stack: the switch "
				"tracer's stack hash was full\n", (unsigned long long)st.ustack_full);
	if (st.early && !quiet)
		fprintf(log ? log : stderr, "viprof: switch tracer: %llu off-CPU intervals (%.1f ms) that began before the stack "
				"walker was loaded were left out of the recording's window\n", (unsigned long long)st.early, (double)st.early_ns / 1e6);
	if (st.opened && !quiet)
		fprintf(log ? log : stderr, "viprof: switch tracer: %llu threads were off CPU when recording began; their "
				"stacks were walked then\n", (unsigned long long)st.opened);
	if (st.agg_full)
		fprintf(log ? log : stderr, "viprof: warning: %llu off-CPU intervals (%.1f ms) were not recorded: the kernel's "
				"aggregation hash was full\n", (unsigned long long)st.agg_full, (double)st.agg_full_ns / 1e6);
	vp_sched__free(s);
	return err;
}

void record_sched__free(struct vp_sched *s)
{
	vp_sched__free(s);
}
