/* perf-style event names -> perf_event_attr (type, config), the live check and the
 * default event. Names follow perf list so that users can copy them from perf. */
#include <ctype.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "hv-glue/events.h"
#include "hv-glue/hv_internal.h"
#include "hv-glue/identity.h"

/* The named events, canonical names first; probe tests them in this order and the
 * "available:" list of a failed check follows it. */
const struct vp_hv_event vp_hv_events[] = {
	{ "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	{ "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
	{ "cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES },
	{ "cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
	{ "branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS },
	{ "branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES },
	{ "bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES },
	{ "stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND },
	{ "stalled-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND },
	{ "ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES },
	{ "cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK },
	{ "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
	{ "page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS },
	{ "context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ "cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS },
	{ "minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN },
	{ "major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ },
	{ "alignment-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS },
	{ "emulation-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS },
};
const int vp_hv_nr_events = sizeof(vp_hv_events) / sizeof(vp_hv_events[0]);

/* perf's other spellings, mapped to the canonical names above. */
static const struct {
	const char *alias, *name;
} aliases[] = {
	{ "cpu-cycles", "cycles" },
	{ "branch-instructions", "branches" },
	{ "idle-cycles-frontend", "stalled-cycles-frontend" },
	{ "idle-cycles-backend", "stalled-cycles-backend" },
	{ "faults", "page-faults" },
	{ "cs", "context-switches" },
	{ "migrations", "cpu-migrations" },
};

/* Generic cache events: <cache>-<op><result>, config = id | op << 8 | result << 16. */
static const char *const cache_names[PERF_COUNT_HW_CACHE_MAX] = {
	[PERF_COUNT_HW_CACHE_L1D] = "L1-dcache", [PERF_COUNT_HW_CACHE_L1I] = "L1-icache",
	[PERF_COUNT_HW_CACHE_LL] = "LLC",        [PERF_COUNT_HW_CACHE_DTLB] = "dTLB",
	[PERF_COUNT_HW_CACHE_ITLB] = "iTLB",     [PERF_COUNT_HW_CACHE_BPU] = "branch",
	[PERF_COUNT_HW_CACHE_NODE] = "node",
};
static const struct {
	const char *suffix;
	unsigned op, result;
} cache_ops[] = {
	{ "loads", PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_ACCESS },
	{ "load-misses", PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS },
	{ "stores", PERF_COUNT_HW_CACHE_OP_WRITE, PERF_COUNT_HW_CACHE_RESULT_ACCESS },
	{ "store-misses", PERF_COUNT_HW_CACHE_OP_WRITE, PERF_COUNT_HW_CACHE_RESULT_MISS },
	{ "prefetches", PERF_COUNT_HW_CACHE_OP_PREFETCH, PERF_COUNT_HW_CACHE_RESULT_ACCESS },
	{ "prefetch-misses", PERF_COUNT_HW_CACHE_OP_PREFETCH, PERF_COUNT_HW_CACHE_RESULT_MISS },
};

static bool parse_cache(const char *name, struct sampler_event *ev)
{
	for (unsigned c = 0; c < PERF_COUNT_HW_CACHE_MAX; c++) {
		size_t n = strlen(cache_names[c]);
		if (strncmp(name, cache_names[c], n) || name[n] != '-')
			continue;
		for (size_t o = 0; o < sizeof(cache_ops) / sizeof(cache_ops[0]); o++) {
			if (strcmp(name + n + 1, cache_ops[o].suffix))
				continue;
			ev->type = PERF_TYPE_HW_CACHE;
			ev->config = c | (uint64_t)cache_ops[o].op << 8 | (uint64_t)cache_ops[o].result << 16;
			return true;
		}
	}
	return false;
}

/* One name without modifiers into ev (type, config, software, canonical name). */
static int parse_one(const char *name, struct sampler_event *ev, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(name, aliases[i].alias))
			name = aliases[i].name;
	for (int i = 0; i < vp_hv_nr_events; i++) {
		if (strcmp(name, vp_hv_events[i].name))
			continue;
		ev->type = vp_hv_events[i].type;
		ev->config = vp_hv_events[i].config;
		ev->software = ev->type == PERF_TYPE_SOFTWARE;
		snprintf(ev->name, sizeof(ev->name), "%s", vp_hv_events[i].name);
		return 0;
	}
	if (parse_cache(name, ev)) {
		snprintf(ev->name, sizeof(ev->name), "%.*s", (int)sizeof(ev->name) - 1, name);  /* matched names are short */
		return 0;
	}
	if (name[0] == 'r' && name[1]) {
		/* Raw PMU event, hex as in perf: r003c, r01c2. */
		const char *h = name + 1;
		if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X'))
			h += 2;
		size_t nd = strspn(h, "0123456789abcdefABCDEF");
		if (nd == 0 || h[nd] || nd > 16) {
			snprintf(err, errlen, "bad raw event '%s': expected r followed by up to 16 hex digits, e.g. r003c", name);
			return -EINVAL;
		}
		ev->type = PERF_TYPE_RAW;
		ev->config = strtoull(h, NULL, 16);
		snprintf(ev->name, sizeof(ev->name), "r%llx", (unsigned long long)ev->config);
		return 0;
	}
	snprintf(err, errlen, "unknown event '%s': use a perf name (cycles, instructions, cache-misses, cpu-clock, "
		 "task-clock, page-faults, context-switches, L1-dcache-load-misses, ...) or rNNNN; "
		 "'viprof probe' shows what this machine supports", name);
	return -EINVAL;
}

/* The end of one event in a comma list: the next comma outside a /term,term/ list. */
static const char *next_comma(const char *p)
{
	bool in_terms = false;
	for (; *p; p++) {
		if (*p == '/')
			in_terms = !in_terms;
		else if (*p == ',' && !in_terms)
			return p;
	}
	return NULL;
}

/* perf's "name/period=N/" and "name/freq=N/" (a sampling rate for this event alone;
 * -c/-F then apply to the others), optionally followed by modifiers ("/u", "/:u").
 * Rewrites tok in place to "name" or "name:mods" for the modifier parser. */
static int parse_terms(char *tok, char *slash, uint64_t *period, uint64_t *freq, char *err, size_t errlen)
{
	char whole[128];
	snprintf(whole, sizeof(whole), "%s", tok);
	char *close = strchr(slash + 1, '/');
	if (!close) {
		snprintf(err, errlen, "event '%s' has no closing '/': write terms as perf does, e.g. cpu-clock/period=1000000/",
			 whole);
		return -EINVAL;
	}
	*close = '\0';
	char *mods = close + 1;
	if (*mods == ':')
		mods++;
	if (slash == tok) {
		snprintf(err, errlen, "event '%s' has no name before its terms: e.g. page-faults/period=1/", whole);
		return -EINVAL;
	}
	for (char *t = slash + 1, *next; t && *t; t = next) {
		next = strchr(t, ',');
		if (next)
			*next++ = '\0';
		char *eq = strchr(t, '=');
		bool is_period = eq && (size_t)(eq - t) == 6 && !strncmp(t, "period", 6);
		bool is_freq = eq && (size_t)(eq - t) == 4 && !strncmp(t, "freq", 4);
		if (!is_period && !is_freq) {
			snprintf(err, errlen, "event '%s': unknown term '%s': viprof takes period=N and freq=N, "
				 "e.g. page-faults/period=1/", whole, t);
			return -EINVAL;
		}
		char *end;
		errno = 0;
		unsigned long long v = strtoull(eq + 1, &end, 10);
		if (eq[1] < '0' || eq[1] > '9' || *end || errno || v == 0) {
			snprintf(err, errlen, "event '%s': %s needs a positive whole number, e.g. %s", whole, t,
				 is_period ? "period=1000000" : "freq=999");
			return -EINVAL;
		}
		if (is_period)
			*period = v;
		else
			*freq = v;
	}
	if (*period && *freq) {
		snprintf(err, errlen, "event '%s' sets both period and freq: sample every N events (period=N) or N times "
			 "a second (freq=N), not both", whole);
		return -EINVAL;
	}
	/* "name" + ":" + modifiers, so that the modifier parser sees perf's other spelling. */
	if (*mods) {
		*slash = ':';
		memmove(slash + 1, mods, strlen(mods) + 1);
	} else {
		*slash = '\0';
	}
	return 0;
}

int vp_events__parse(const char *list, struct sampler_event *out, int max, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	char dummy[8];
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	if (!list || !out || max <= 0) {
		snprintf(err, errlen, "no event list given: pass e.g. -e cpu-clock");
		return -EINVAL;
	}
	int n = 0;
	const char *p = list;
	for (;;) {
		const char *end = next_comma(p);
		size_t len = end ? (size_t)(end - p) : strlen(p);
		while (len && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		while (len && isspace((unsigned char)p[len - 1]))
			len--;
		char tok[128];
		if (len == 0) {
			snprintf(err, errlen, "empty event name in '%s': separate events with single commas, e.g. cycles,page-faults", list);
			return -EINVAL;
		}
		if (len >= sizeof(tok)) {
			snprintf(err, errlen, "event name '%.40s...' is too long (max %zu characters)", p, sizeof(tok) - 1);
			return -ENAMETOOLONG;
		}
		if (n == max) {
			snprintf(err, errlen, "too many events in '%s': at most %d at once", list, max);
			return -E2BIG;
		}
		memcpy(tok, p, len);
		tok[len] = '\0';

		struct sampler_event ev;
		memset(&ev, 0, sizeof(ev));
		uint64_t t_period = 0, t_freq = 0;
		char *slash = strchr(tok, '/');
		if (slash) {
			int r = parse_terms(tok, slash, &t_period, &t_freq, err, errlen);
			if (r)
				return r;
		}
		char *colon = strchr(tok, ':');
		bool u = false, k = false;
		if (colon) {
			*colon = '\0';
			const char *m = colon + 1;
			if (!*m) {
				snprintf(err, errlen, "event '%s:' has an empty modifier: use :u (user only) or :k (kernel only)", tok);
				return -EINVAL;
			}
			for (; *m; m++) {
				if (*m == 'u')
					u = true;
				else if (*m == 'k')
					k = true;
				else {
					snprintf(err, errlen, "event '%s:%s' has unknown modifier '%c': use :u (user only) or :k (kernel only)",
						 tok, colon + 1, *m);
					return -EINVAL;
				}
			}
		}
		int r = parse_one(tok, &ev, err, errlen);
		if (r)
			return r;
		/* perf semantics: ":u" counts only user mode, ":k" only kernel, ":uk" both. */
		ev.exclude_kernel = u && !k;
		ev.exclude_user = k && !u;
		if (colon) {
			size_t nl = strlen(ev.name);
			snprintf(ev.name + nl, sizeof(ev.name) - nl, ":%s%s", u ? "u" : "", k ? "k" : "");
		}
		ev.period = t_period;
		ev.freq = t_freq;
		out[n++] = ev;
		if (!end)
			break;
		p = end + 1;
	}
	return n;
}

static bool denied(int r)
{
	return r == -EACCES || r == -EPERM;
}

static int paranoid_level(void)
{
	return vp_read_int_file("/proc/sys/kernel/perf_event_paranoid", 2);
}

/* Why an event that perf_event_open refused fails here, in words; fits after "event 'x' ". */
static void explain(const struct sampler_event *ev, int e, char *cause, size_t len)
{
	const char *hv = vp_hv_identity__get()->name;
	bool vm = strcmp(hv, "none") != 0;
	bool pmu_event = ev->type == PERF_TYPE_HARDWARE || ev->type == PERF_TYPE_HW_CACHE || ev->type == PERF_TYPE_RAW;
	/* No PMU first: even root cannot fix that, so it is the cause worth naming. */
	if (pmu_event && !vp_hv__pmu_device() && vm)
		snprintf(cause, len, "cannot be counted on this VM (%s): the hypervisor exposes no PMU", hv);
	else if (pmu_event && !vp_hv__pmu_device())
		snprintf(cause, len, "cannot be counted here: the kernel registered no CPU PMU");
	else if (e == EACCES || e == EPERM)
		snprintf(cause, len, "is not permitted (perf_event_paranoid=%d and no CAP_PERFMON): run as root or "
			 "'sysctl kernel.perf_event_paranoid=1'", paranoid_level());
	else if (pmu_event && (e == ENOENT || e == EOPNOTSUPP))
		snprintf(cause, len, "is not supported by this %s (%s)", vm ? "vPMU" : "PMU", vp_hv__errname(e));
	else
		snprintf(cause, len, "cannot be opened (%s: %s)", vp_hv__errname(e), strerror(e));
}

int vp_events__check(const struct sampler_event *ev, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!ev)
		return -EINVAL;
	int r = vp_hv__try_event(ev->type, ev->config, true, ev->exclude_kernel, ev->exclude_user);
	if (r == 0 || !err || !errlen)
		return r;
	char cause[320], avail[512];
	if (denied(r) && !ev->exclude_kernel && vp_hv__try_event(ev->type, ev->config, true, true, false) == 0 &&
	    vp_hv__user_mode_counts(ev->type, ev->config) == 0) {
		snprintf(cause, sizeof(cause), "needs kernel mode for this user (perf_event_paranoid=%d, no CAP_PERFMON): "
			 "the kernel counts it in its own context, so its user-mode variant always reads 0; run as root or "
			 "grant CAP_PERFMON", paranoid_level());
	} else if (denied(r) && !ev->exclude_kernel && vp_hv__try_event(ev->type, ev->config, true, true, false) == 0) {
		/* perf_event_paranoid=2: this user may sample its own threads, user mode only. */
		char base[64];
		snprintf(base, sizeof(base), "%.*s", (int)strcspn(ev->name, ":"), ev->name);
		snprintf(cause, sizeof(cause), "cannot include kernel mode for this user (perf_event_paranoid=%d, no "
			 "CAP_PERFMON): use '%s:u' for user mode only, or run as root", paranoid_level(), base);
	} else if (vp_hv__try_event(ev->type, ev->config, false, ev->exclude_kernel, ev->exclude_user) == 0) {
		/* A counting-only vPMU opens the event but cannot sample it; say so. */
		snprintf(cause, sizeof(cause), "can be counted but not sampled here (%s: no overflow interrupt)",
			 vp_hv__errname(r));
	} else {
		explain(ev, -r, cause, sizeof(cause));
	}
	vp_hv__available(avail, sizeof(avail));
	const char *comma = strchr(avail, ',');
	size_t first = comma ? (size_t)(comma - avail) : strlen(avail);
	if (strcmp(avail, "none"))
		snprintf(err, errlen, "event '%s' %s; available: %s; try -e %.*s", ev->name, cause, avail, (int)first, avail);
	else
		snprintf(err, errlen, "event '%s' %s; no event can be sampled here", ev->name, cause);
	return r;
}

int vp_events__check_count(const struct sampler_event *ev, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!ev)
		return -EINVAL;
	int r = vp_hv__try_event(ev->type, ev->config, false, ev->exclude_kernel, ev->exclude_user);
	if (r == 0)
		return 0;
	/* The sampling check explains what this user or this machine lacks. */
	int rs = vp_events__check(ev, err, errlen);
	if (rs == 0 && err && errlen)
		snprintf(err, errlen, "event '%s' cannot be counted here (%s), though it can be sampled; check "
			 "kernel.perf_event_paranoid", ev->name, vp_hv__errname(r));
	return rs ? rs : r;
}

int vp_events__default(struct sampler_event *out, char *why, size_t whylen)
{
	char err[512], dummy[8];
	if (!why || !whylen) {
		why = dummy;
		whylen = sizeof(dummy);
	}
	if (!out) {
		snprintf(why, whylen, "no output event given");
		return -EINVAL;
	}
	const char *hv = vp_hv_identity__get()->name;
	bool vm = strcmp(hv, "none") != 0;
	char user_only[160];
	snprintf(user_only, sizeof(user_only), "; user mode only, because perf_event_paranoid=%d and no CAP_PERFMON "
		 "(run as root to include the kernel)", paranoid_level());

	/* Preference: cycles, cycles:u, cpu-clock, cpu-clock:u. Kernel access is lost to
	 * perf_event_paranoid for every event alike, so cycles:u never beats a working cpu-clock
	 * by accident. */
	static const char *const cands[] = { "cycles", "cycles:u", "cpu-clock", "cpu-clock:u" };
	int chosen = -1, rc = 0;
	for (int i = 0; i < 4 && chosen < 0; i++) {
		struct sampler_event ev;
		if (vp_events__parse(cands[i], &ev, 1, err, sizeof(err)) != 1)
			return -EINVAL;
		int r = vp_hv__try_event(ev.type, ev.config, true, ev.exclude_kernel, ev.exclude_user);
		if (i == 0)
			rc = r;
		if (r == 0) {
			*out = ev;
			chosen = i;
		}
	}
	if (chosen < 0) {
		struct sampler_event ev;
		vp_events__parse("cpu-clock", &ev, 1, err, sizeof(err));
		int r = vp_events__check(&ev, why, whylen);
		return r ? r : -ENOENT;
	}
	if (chosen <= 1) {
		if (vm)
			snprintf(why, whylen, "%s: the vPMU of this VM (%s) samples it%s", out->name, hv,
				 chosen == 1 ? user_only : "");
		else
			snprintf(why, whylen, "%s: the CPU's PMU samples it%s", out->name, chosen == 1 ? user_only : "");
		return 0;
	}
	const char *tail = chosen == 3 ? user_only : "";
	if (denied(rc) && vp_hv__pmu_device())
		snprintf(why, whylen, "%s (hrtimer): cycles is not permitted (%s)%s", out->name, vp_hv__errname(rc), tail);
	else if (!vp_hv__pmu_device() && vm)
		snprintf(why, whylen, "%s (hrtimer): this VM (%s) exposes no PMU, so cycles cannot be sampled%s", out->name,
			 hv, tail);
	else if (!vp_hv__pmu_device())
		snprintf(why, whylen, "%s (hrtimer): the kernel registered no CPU PMU, so cycles cannot be sampled%s",
			 out->name, tail);
	else
		snprintf(why, whylen, "%s (hrtimer): the %s cannot sample cycles (%s)%s", out->name, vm ? "vPMU" : "PMU",
			 vp_hv__errname(rc), tail);
	return 0;
}
