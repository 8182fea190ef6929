/* 'viprof report': reads one or more session directories into one profile (several
 * merge), optionally a base for --diff, and writes one report. One struct of defaults,
 * one parser that validates every value, then one switch on the format. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/util.h"
#include "fleet/fleet.h"
#include "postproc/hvsyms.h"
#include "postproc/profile_xform.h"
#include "report/report.h"
#include "report/report_pipeline.h"
#include "report/wall.h"
#include "postproc/session.h"

#define DEFAULT_DIR "viprof.session"
#define MAX_IDS 1024
#define MAX_TOP 1000000


struct report_args {
	const char **dirs;
	int ndirs;
	enum vp_report_format format;
	bool format_given;         /* -F was on the command line */
	const char *output;        /* NULL = stdout */
	int top;
	enum vp_sort sort;
	const char *event;         /* NULL = the first recorded event */
	bool layers;
	uint32_t pids[MAX_IDS], tids[MAX_IDS];
	int npids, ntids;
	const char *comm;
	const char *container;     /* --container: an id prefix, a pod UID, a cgroup path or "host" */
	double t_from, t_to;
	bool map_flat;
	const char *hv_syms;
	const char *diff_base;
	bool no_color;
	const char *title;
	bool wall;                 /* --wall: running + runnable + blocked + steal */
	bool vthreads;             /* --vthreads: virtual threads apart from their carriers */
	int norm;                  /* --norm 1, --no-norm 0, -1: on for --diff and merges */
	int merge_tiers;           /* --merge-tiers 1, --no-merge-tiers 0, -1: on for --diff */
	bool threads;              /* --threads: folded lines per thread */
	bool reverse;              /* --reverse: inverted, callee first */
	struct vp_xform xf;        /* --include, --exclude, --minwidth, --simple, --java-only */
	const char *where;         /* --where, for clickhouse:// sources */
	const char *base_where;    /* --base-where: the --diff base's, when it differs */
	bool base_time;            /* --base-time given: the base's window is base_from..base_to */
	double base_from, base_to;
};

static void defaults(struct report_args *a)
{
	memset(a, 0, sizeof(*a));
	a->format = VP_REPORT_TEXT;
	a->top = 25;
	a->sort = VP_SORT_SELF;
	a->norm = -1;
	a->merge_tiers = -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: viprof report [DIR...] [options]\n"
		"\n"
		"Reads session directories (default ./" DEFAULT_DIR "; several are merged into one\n"
		"profile) and writes a report.\n"
		"\n"
		"  -F, --format FMT       text (default), folded, html, pprof, json or jfr (JDK Flight\n"
		"                         Recorder: jdk.ExecutionSample events for JMC, IntelliJ, jfr)\n"
		"  -o, --output FILE      write to FILE instead of standard output; without -F the\n"
		"                         format follows its extension (.html .pb.gz .jfr .json\n"
		"                         .folded/.collapsed .txt)\n"
		"  -n, --top N            rows in the hotspot tables (default 25)\n"
		"  -s, --sort KEY         self (default) or total\n"
		"  -e, --event NAME       which recorded event to rank and draw (default: the first)\n"
		"      --layers           per-layer summary (hypervisor, kernel, native, JVM, JIT, ...)\n"
		"      --wall             where wall time went (sessions recorded with --off-cpu):\n"
		"                         per thread and stack, running + runnable + blocked + steal;\n"
		"                         text prints the table (application threads first, rows\n"
		"                         named by the innermost Java frames and the wait, e.g.\n"
		"                         '..;Shop.query;Thread.sleep [sleep]'), other formats draw\n"
		"                         the event 'wall' (and carry running, runnable, blocked)\n"
		"      --vthreads         a virtual thread's samples under the virtual thread\n"
		"                         ('[vthread #ID NAME]', JDK 21+) instead of its carrier\n"
		"  -p, --pid P[,P..]      only these processes\n"
		"  -t, --tid T[,T..]      only these threads\n"
		"      --comm NAME        only threads with this name (as reports print it, or the kernel's)\n"
		"      --container C      only processes of container C: an id or its first 4+\n"
		"                         characters (as docker ps shows them), a pod UID, a cgroup\n"
		"                         path (and those below it), or 'host' for none\n"
		"      --time FROM,TO     only samples between FROM and TO seconds after time zero,\n"
		"                         when sampling started (the header states it); a wait\n"
		"                         counts by its part inside (TO may be empty: to the end)\n"
		"      --map-mode MODE    epoch (default: time-correct JIT maps) or flat (one timeless\n"
		"                         map, last writer wins, as with perf-PID.map)\n"
		"      --hv-syms FILE     hypervisor symbols (a xen-syms ELF)\n"
		"      --diff BASE_DIR    compare against BASE_DIR, in shares of each total\n"
		"      --norm, --no-norm  names normalised for comparison: lambda and hidden-class\n"
		"                         addresses and generated accessor numbers removed\n"
		"                         (Shop$$Lambda$2.0x7fba7c000c28 -> Shop$$Lambda); on by\n"
		"                         default with --diff or several DIRs, else off\n"
		"      --merge-tiers, --no-merge-tiers\n"
		"                         a Java method as one frame whatever ran it (interpreted,\n"
		"                         C1, C2, OSR, inlined), in the layer that had most of its\n"
		"                         samples; on by default with --diff (no colder interpreted\n"
		"                         and hotter compiled twins), else off\n"
		"      --threads          folded: each line starts with its thread's name (as\n"
		"                         async-profiler's -t); without it stacks of all threads\n"
		"                         merge, as in async-profiler's collapsed output\n"
		"      --reverse          inverted, callee first: folded lines leaf first; text adds\n"
		"                         the callers of the hottest frames (html: the page's\n"
		"                         Reverse control, #reverse=1)\n"
		"  -I, --include REGEX    only stacks with a frame matching REGEX (POSIX extended;\n"
		"                         repeatable: any of them)\n"
		"  -X, --exclude REGEX    without the stacks that have a frame matching REGEX\n"
		"      --minwidth PCT     html, folded: cut call-tree nodes narrower than PCT%% of\n"
		"                         the total (their samples stay with their caller)\n"
		"      --simple           names without argument lists (Shop.buy, not\n"
		"                         Shop.buy(String, int))\n"
		"      --java-only        stacks start at their outermost Java frame (Thread.run),\n"
		"                         not at the libc and libjvm frames below it\n"
		"      --where K=V[,K=V..]  a clickhouse:// source's rows: service, host, container,\n"
		"                         thread, event, interval ('*' any run of characters; a key\n"
		"                         given twice is either value); there --time is in Unix seconds\n"
		"      --base-where K=V.., --base-time FROM,TO  the --diff base's rows and window when\n"
		"                         they differ (two label sets, or yesterday against today)\n"
		"      --title TEXT       title of the HTML flame graph\n"
		"      --no-color         no colour even on a terminal (so does NO_COLOR=1)\n"
		"  -h, --help             this text\n"
		"\n"
		"examples:\n"
		"  viprof report                                  hotspots of ./" DEFAULT_DIR "\n"
		"  viprof report run1 -F html -o flame.html       an interactive flame graph\n"
		"  viprof report run1 -F pprof -o run1.pb.gz      then: pprof -http=: run1.pb.gz\n"
		"  viprof report run1 -F folded | flamegraph.pl   folded stacks for other tools\n"
		"  viprof report run1 --reverse --top 5           the hottest frames and their callers\n"
		"  viprof report run1 -F jfr -o run1.jfr          then: jfr print run1.jfr, or open it in JMC\n"
		"  viprof report run2 --diff run1 -F html -o d.html   what got hotter or colder\n"
		"  viprof report run1 run2 --layers               two runs merged, by layer\n"
		"  viprof report run1 -p 1234 --time 10,20 -e page-faults   one process, 10 s to 20 s\n"
		"  viprof report run1 --wall                      on-CPU, run queue, blocked and steal\n"
		"  viprof report run1 --java-only --simple -I 'Shop\\.' -F html -o shop.html\n"
		"                                                 the Java stacks through class Shop\n"
		"  viprof report run1 -e off-cpu -F html -o off.html   where threads waited\n"
		"  viprof report clickhouse://ch1:8123/viprof --where 'service=shop,host=vm-*'   the fleet\n"
		"                                                 (docs/fleet.md; aggregated in ClickHouse)\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "viprof report: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see 'viprof report --help'\n");
	return 2;
}

static int parse_ids(const char *arg, uint32_t *out, int *n, const char *what)
{
	char *copy = strdup(arg), *save = NULL;
	if (!copy)
		return usage_error("out of memory");
	int ret = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		/* 0 is valid: the idle task ("swapper") that -a recordings sample on idle CPUs. */
		long long v = vp_parse_num(tok, 0, UINT32_MAX);
		if (v < 0) {
			ret = usage_error("--%s: '%s' is not a %s number (expected e.g. --%s 1234,5678)", what, tok, what, what);
			break;
		}
		if (*n >= MAX_IDS) {
			ret = usage_error("--%s: more than %d values", what, MAX_IDS);
			break;
		}
		out[(*n)++] = (uint32_t)v;
	}
	if (!ret && *n == 0)
		ret = usage_error("--%s needs at least one number", what);
	free(copy);
	return ret;
}

static bool parse_seconds(const char *s, double *out)
{
	double v = vp_parse_duration(s);
	if (v < 0)
		return false;
	*out = v;
	return true;
}

static int parse_time(const char *arg, struct report_args *a)
{
	const char *comma = strchr(arg, ',');
	if (!comma)
		return usage_error("--time '%s': expected FROM,TO in seconds (e.g. --time 2.5,10 or --time 5,)", arg);
	char from[64];
	size_t fl = (size_t)(comma - arg);
	if (fl == 0 || fl >= sizeof(from))
		return usage_error("--time '%s': FROM is missing or too long (e.g. --time 0,10)", arg);
	memcpy(from, arg, fl);
	from[fl] = 0;
	if (!parse_seconds(from, &a->t_from))
		return usage_error("--time: FROM '%s' is not a time >= 0 (seconds, or 500ms, 2s, 1m)", from);
	a->t_to = 0;
	if (comma[1]) {
		if (!parse_seconds(comma + 1, &a->t_to))
			return usage_error("--time: TO '%s' is not a time >= 0 (seconds, or 500ms, 2s, 1m)", comma + 1);
		if (a->t_to <= a->t_from)
			return usage_error("--time %s: TO must be after FROM", arg);
	}
	return 0;
}

/* The format a file name asks for by its extension (as async-profiler's -f does), or -1
 * when the name says nothing. */
static int format_for_path(const char *path)
{
	static const struct { const char *ext; enum vp_report_format f; } exts[] = {
		{ ".html", VP_REPORT_HTML }, { ".htm", VP_REPORT_HTML },
		{ ".pb.gz", VP_REPORT_PPROF }, { ".pprof", VP_REPORT_PPROF }, { ".pb", VP_REPORT_PPROF },
		{ ".jfr", VP_REPORT_JFR }, { ".json", VP_REPORT_JSON },
		{ ".folded", VP_REPORT_FOLDED }, { ".collapsed", VP_REPORT_FOLDED },
		{ ".txt", VP_REPORT_TEXT },
	};
	size_t n = strlen(path);
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t k = strlen(exts[i].ext);
		if (n > k && !strcasecmp(path + n - k, exts[i].ext))
			return (int)exts[i].f;
	}
	return -1;
}

enum { OPT_LAYERS = 256, OPT_COMM, OPT_TIME, OPT_MAPMODE, OPT_HVSYMS, OPT_DIFF, OPT_NOCOLOR, OPT_TITLE, OPT_WALL,
       OPT_VTHREADS, OPT_CONTAINER, OPT_NORM, OPT_NONORM, OPT_MINWIDTH, OPT_SIMPLE, OPT_JAVAONLY,
       OPT_MERGETIERS, OPT_NOMERGETIERS, OPT_THREADS, OPT_REVERSE, OPT_WHERE, OPT_BASE_WHERE, OPT_BASE_TIME };
static const struct option report_longopts[] = {
	{ "format", required_argument, NULL, 'F' },
	{ "output", required_argument, NULL, 'o' },
	{ "top", required_argument, NULL, 'n' },
	{ "sort", required_argument, NULL, 's' },
	{ "event", required_argument, NULL, 'e' },
	{ "layers", no_argument, NULL, OPT_LAYERS },
	{ "pid", required_argument, NULL, 'p' },
	{ "tid", required_argument, NULL, 't' },
	{ "comm", required_argument, NULL, OPT_COMM },
	{ "container", required_argument, NULL, OPT_CONTAINER },
	{ "time", required_argument, NULL, OPT_TIME },
	{ "map-mode", required_argument, NULL, OPT_MAPMODE },
	{ "hv-syms", required_argument, NULL, OPT_HVSYMS },
	{ "diff", required_argument, NULL, OPT_DIFF },
	{ "no-color", no_argument, NULL, OPT_NOCOLOR },
	{ "no-colour", no_argument, NULL, OPT_NOCOLOR },
	{ "title", required_argument, NULL, OPT_TITLE },
	{ "wall", no_argument, NULL, OPT_WALL },
	{ "vthreads", no_argument, NULL, OPT_VTHREADS },
	{ "norm", no_argument, NULL, OPT_NORM },
	{ "no-norm", no_argument, NULL, OPT_NONORM },
	{ "include", required_argument, NULL, 'I' },
	{ "exclude", required_argument, NULL, 'X' },
	{ "minwidth", required_argument, NULL, OPT_MINWIDTH },
	{ "simple", no_argument, NULL, OPT_SIMPLE },
	{ "java-only", no_argument, NULL, OPT_JAVAONLY },
	{ "merge-tiers", no_argument, NULL, OPT_MERGETIERS },
	{ "no-merge-tiers", no_argument, NULL, OPT_NOMERGETIERS },
	{ "threads", no_argument, NULL, OPT_THREADS },
	{ "reverse", no_argument, NULL, OPT_REVERSE },
	{ "where", required_argument, NULL, OPT_WHERE },
	{ "base-where", required_argument, NULL, OPT_BASE_WHERE },
	{ "base-time", required_argument, NULL, OPT_BASE_TIME },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* The per-group option parsers below return 0 when they took option c, the exit status
 * (2) after printing a usage error, or NOT_MINE when c belongs to another group. */
#define NOT_MINE (-1)

/* What the report looks like: its format, file, size, order and decorations. */
static int parse_output_opt(int c, const char *arg, struct report_args *a)
{
	switch (c) {
	case 'F': {
		int i;
		for (i = 0; i < VP_REPORT_NFORMATS; i++)
			if (!strcmp(arg, vp_report_format_name((enum vp_report_format)i)))
				break;
		if (i == VP_REPORT_NFORMATS)
			return usage_error("unknown format '%s' (text, folded, html, pprof, json or jfr)%s", arg,
					   arg[0] >= '0' && arg[0] <= '9'
					   ? "; in report -F is the output format: the sampling rate is record's -F" : "");
		a->format = (enum vp_report_format)i;
		a->format_given = true;
		return 0;
	}
	case 'o':
		if (!*arg)
			return usage_error("--output needs a file name (or - for standard output)");
		a->output = strcmp(arg, "-") ? arg : NULL;
		return 0;
	case 'n': {
		long long v = vp_parse_num(arg, 1, MAX_TOP);
		if (v < 0)
			return usage_error("--top '%s': expected a number from 1 to %d", arg, MAX_TOP);
		a->top = (int)v;
		return 0;
	}
	case 's':
		if (!strcmp(arg, "self"))
			a->sort = VP_SORT_SELF;
		else if (!strcmp(arg, "total"))
			a->sort = VP_SORT_TOTAL;
		else
			return usage_error("--sort '%s': expected self or total", arg);
		return 0;
	case 'e':
		if (!*arg || strlen(arg) >= sizeof(((struct vp_prof_event *)0)->name))
			return usage_error("--event '%s': not an event name (e.g. cpu-clock)", arg);
		a->event = arg;
		return 0;
	case OPT_WALL:
		a->wall = true;
		return 0;
	case OPT_VTHREADS:
		a->vthreads = true;
		return 0;
	case OPT_LAYERS:
		a->layers = true;
		return 0;
	case OPT_NOCOLOR:
		a->no_color = true;
		return 0;
	case OPT_TITLE:
		a->title = arg;
		return 0;
	case OPT_THREADS:
		a->threads = true;
		return 0;
	case OPT_REVERSE:
		a->reverse = true;
		return 0;
	}
	return NOT_MINE;
}

/* Which samples count: processes, threads, containers, a time window, the sources and
 * the --diff base, and how their addresses are named. */
static int parse_select_opt(int c, const char *arg, struct report_args *a)
{
	switch (c) {
	case OPT_WHERE:
		a->where = arg;
		return 0;
	case OPT_BASE_WHERE:
		a->base_where = arg;
		return 0;
	case OPT_BASE_TIME: {
		/* The same syntax as --time, kept apart for the base. */
		double f = a->t_from, t = a->t_to;
		int ret = parse_time(arg, a);
		if (ret)
			return ret;
		a->base_from = a->t_from, a->base_to = a->t_to, a->base_time = true;
		a->t_from = f, a->t_to = t;
		return 0;
	}
	case 'p':
		return parse_ids(arg, a->pids, &a->npids, "pid");
	case 't':
		return parse_ids(arg, a->tids, &a->ntids, "tid");
	case OPT_COMM:
		/* The name reports print (a Java thread's full name) or the kernel's
		 * 15-character one: both select the thread. */
		if (!*arg || strlen(arg) > 255)
			return usage_error("--comm '%s': a thread name has 1 to 255 characters", arg);
		a->comm = arg;
		return 0;
	case OPT_CONTAINER:
		if (strcmp(arg, "host") && arg[0] != '/' && strlen(arg) < 4)
			return usage_error("--container '%s': give at least 4 characters of the container id, a pod "
					   "UID, a cgroup path starting with '/', or 'host'", arg);
		a->container = arg;
		return 0;
	case OPT_TIME:
		return parse_time(arg, a);
	case OPT_MAPMODE:
		if (!strcmp(arg, "epoch"))
			a->map_flat = false;
		else if (!strcmp(arg, "flat"))
			a->map_flat = true;
		else
			return usage_error("--map-mode '%s': expected epoch or flat", arg);
		return 0;
	case OPT_HVSYMS: {
		/* Checked here, before any session is read: a file that is not a Xen
		 * image (e.g. /bin/true) would name Xen's samples after its own symbols. */
		char why[512];
		struct vp_hvsyms *x = vp_hvsyms__open(arg, why, sizeof(why));
		if (!x)
			return usage_error("--hv-syms: %s", why);
		vp_hvsyms__close(x);
		a->hv_syms = arg;
		return 0;
	}
	case OPT_DIFF:
		if (!*arg)
			return usage_error("--diff needs the base session directory");
		a->diff_base = arg;
		return 0;
	}
	return NOT_MINE;
}

/* The views of the profile (struct vp_xform): names, filters, cuts, normalising. */
static int parse_view_opt(int c, const char *arg, struct report_args *a)
{
	switch (c) {
	case OPT_NORM:
	case OPT_NONORM:
		a->norm = c == OPT_NORM;
		return 0;
	case 'I':
	case 'X': {
		const char **v = c == 'I' ? a->xf.include : a->xf.exclude;
		int *n = c == 'I' ? &a->xf.ninclude : &a->xf.nexclude;
		if (!*arg)
			return usage_error("--%s needs a regular expression", c == 'I' ? "include" : "exclude");
		if (*n >= VP_XFORM_MAX_RE)
			return usage_error("more than %d --%s patterns; join them with |", VP_XFORM_MAX_RE,
					   c == 'I' ? "include" : "exclude");
		v[(*n)++] = arg;
		return 0;
	}
	case OPT_MINWIDTH: {
		char *end;
		errno = 0;
		double v = strtod(arg, &end);
		if (errno || end == arg || *end || !isfinite(v) || v < 0 || v >= 100)
			return usage_error("--minwidth '%s': expected a percentage from 0 to 100 (e.g. --minwidth 0.5)", arg);
		a->xf.minwidth = v;
		return 0;
	}
	case OPT_SIMPLE:
		a->xf.simple = true;
		return 0;
	case OPT_JAVAONLY:
		a->xf.java_only = true;
		return 0;
	case OPT_MERGETIERS:
	case OPT_NOMERGETIERS:
		a->merge_tiers = c == OPT_MERGETIERS;
		return 0;
	}
	return NOT_MINE;
}

/* -o flame.html writes HTML unless -F says otherwise; an extension that disagrees
 * with -F is most likely a mistake, so it is refused rather than guessed. */
static int format_from_output(struct report_args *a)
{
	if (!a->output)
		return 0;
	int f = format_for_path(a->output);
	if (f >= 0 && !a->format_given) {
		a->format = (enum vp_report_format)f;
		if (f != VP_REPORT_TEXT)
			fprintf(stderr, "viprof report: writing %s to %s (from its extension; -F picks another format)\n",
				vp_report_format_name(a->format), a->output);
	} else if (f >= 0 && f != VP_REPORT_TEXT && (enum vp_report_format)f != a->format)
		return usage_error("-F %s but -o '%s' names a %s file; drop -F or change the file name",
				   vp_report_format_name(a->format), a->output,
				   vp_report_format_name((enum vp_report_format)f));
	return 0;
}

/* The options that each parse alone but have no meaning together. */
static int check_combinations(const struct report_args *a)
{
	if (a->format == VP_REPORT_FOLDED && a->diff_base)
		return usage_error("--diff has no folded form; use text, html or json (or fold each run and use difffolded.pl)");
	if (a->format == VP_REPORT_PPROF && a->diff_base)
		return usage_error("--diff has no pprof form; write both runs as pprof and use 'pprof -diff_base'");
	if (a->format == VP_REPORT_JFR && a->diff_base)
		return usage_error("--diff has no JFR form; write each run as JFR and compare them in JMC");
	if (a->threads && a->format != VP_REPORT_FOLDED)
		return usage_error("--threads splits folded lines by thread; with -F %s threads are %s", vp_report_format_name(a->format),
				   a->format == VP_REPORT_HTML ? "the page's 'Per thread' control (#threads=1)"
				   : a->format == VP_REPORT_TEXT ? "filtered with --tid or --comm (and tabled by --wall)"
				   : "in every stack already (pprof's thread label, JSON's comm, JFR's thread)");
	if (a->reverse && a->format != VP_REPORT_FOLDED && a->format != VP_REPORT_TEXT)
		return usage_error("--reverse inverts text and folded reports; with -F %s %s", vp_report_format_name(a->format),
				   a->format == VP_REPORT_HTML ? "use the page's Reverse control (#reverse=1)"
				   : "the stacks keep their order (root first) for the tools that read them");
	if (a->reverse && a->wall && !a->event && a->format == VP_REPORT_TEXT)
		return usage_error("the --wall table has no --reverse form; '-e wall --reverse' gives the callers of the "
				   "frames that took the most wall time");
	if (a->reverse && a->diff_base)
		return usage_error("--reverse has no --diff form; invert each run's report instead");
	if (a->reverse && a->format == VP_REPORT_TEXT && a->sort == VP_SORT_TOTAL)
		return usage_error("--reverse shows the callers of the frames ranked by self time; drop --sort total");
	if (a->reverse && a->xf.minwidth > 0)
		return usage_error("--minwidth cuts the call tree root first, which --reverse inverts; use one of them");
	if (a->xf.minwidth > 0 && a->format != VP_REPORT_FOLDED && a->format != VP_REPORT_HTML)
		return usage_error("--minwidth cuts the call tree of html and folded reports; use -F html or -F folded (text has --top)");
	return 0;
}

/* Returns 0, or the exit status (2) after printing the usage error; *help on --help. */
static int parse_args(int argc, char **argv, struct report_args *a, bool *help)
{
	int c, ret;
	*help = false;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":F:o:n:s:e:p:t:I:X:h", report_longopts, NULL)) != -1) {
		if (c == 'h') {
			*help = true;
			return 0;
		}
		if (c == ':')
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		ret = parse_output_opt(c, optarg, a);
		if (ret == NOT_MINE)
			ret = parse_select_opt(c, optarg, a);
		if (ret == NOT_MINE)
			ret = parse_view_opt(c, optarg, a);
		if (ret == NOT_MINE)
			return usage_error("unknown option '%s'", argv[optind - 1]);
		if (ret)
			return ret;
	}
	a->dirs = (const char **)(argv + optind);
	a->ndirs = argc - optind;
	if ((ret = format_from_output(a)))
		return ret;
	return check_combinations(a);
}

/* Loads dirs into p; prints the one-line reason and returns false on failure. */
static bool load(struct vp_profile *p, const char *const *dirs, int ndirs, const struct vp_session_opts *so,
		 const char *where)
{
	for (int i = 0; i < ndirs; i++) {
		if (vp_fleet__is_url(dirs[i])) {
			/* The fleet: aggregated in ClickHouse, then the same profile as a session's. */
			char ferr[1024] = "";
			struct vp_fleet_url u;
			struct vp_fleet_filter f = { .where = where, .t_from = so->t_from, .t_to = so->t_to,
						     .container = so->container, .thread = so->comm, .times = so->times };
			if (so->npids || so->ntids) {
				fprintf(stderr, "viprof report: %s: --pid and --tid name one machine's processes; a fleet "
					"is filtered with --where (service, host, container, thread)\n", dirs[i]);
				return false;
			}
			if (vp_fleet__parse_url(dirs[i], &u, ferr, sizeof(ferr)) ||
			    vp_fleet__load(&u, &f, p, ferr, sizeof(ferr))) {
				fprintf(stderr, "viprof report: %s\n", ferr);
				return false;
			}
			continue;
		}
		if (where) {
			fprintf(stderr, "viprof report: --where filters a clickhouse:// source; '%s' is a session "
				"directory (use --pid, --comm, --container, --time)\n", dirs[i]);
			return false;
		}
		struct stat sb;
		int e = stat(dirs[i], &sb) ? errno : 0;
		if (e || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "viprof report: no session at '%s': %s; record one with 'viprof record -o %s -- CMD' or pass the session's path\n",
				dirs[i], e ? strerror(e) : "not a directory", dirs[i]);
			return false;
		}
		char err[512] = "";
		int r = vp_session__load(dirs[i], p, so, err, sizeof(err));
		if (r) {
			/* The loader's message names the file and the cause; add the path if it did not. */
			if (err[0] && strstr(err, dirs[i]))
				fprintf(stderr, "viprof report: %s\n", err);
			else
				fprintf(stderr, "viprof report: cannot read session '%s': %s\n", dirs[i],
					err[0] ? err : strerror(-r));
			return false;
		}
	}
	return true;
}

/* Loads the sessions into p and the --diff base into *base (freed by the caller, also on
 * failure); false after printing why, also when p holds no samples. */
static bool load_profiles(const struct report_args *a, const char *const *dirs, int ndirs,
			  const struct vp_session_opts *so, struct vp_profile *p, struct vp_profile **base)
{
	if (!load(p, dirs, ndirs, so, a->where))
		return false;
	if (a->diff_base) {
		*base = vp_profile__new();
		if (!*base) {
			fprintf(stderr, "viprof report: out of memory\n");
			return false;
		}
		const char *bd[] = { a->diff_base };
		struct vp_session_opts bso = *so;
		if (a->base_time)
			bso.t_from = a->base_from, bso.t_to = a->base_to;
		if (!load(*base, bd, 1, &bso, a->base_where ? a->base_where : a->where))
			return false;
	}
	if (!vp_profile__has_samples(p)) {
		bool filtered = a->npids || a->ntids || a->comm || a->container || a->t_from > 0 || a->t_to > 0;
		fprintf(stderr, "viprof report: no samples in %s%s%s\n", dirs[0], ndirs > 1 ? " and the others" : "",
			vp_fleet__is_url(dirs[0]) ? " for --where/--time/--container/--comm (the store holds no such rows: "
						    "check the names and that --time is in Unix seconds)" :
			filtered ? " after --pid/--tid/--comm/--container/--time; widen the filters"
				 : ": the recorded processes never ran on a CPU while sampling (an idle -p target: "
				   "record it while it works, or add --off-cpu to see where it waits), or the recording was "
				   "shorter than one sample period");
		return false;
	}
	return true;
}

/* Adds the derived views and events (--wall) to p and picks the event the report sorts
 * by into ro->sort_event; false after printing why. */
static bool pick_event(const struct report_args *a, struct vp_profile *p, const struct vp_profile *base,
		       const char *dir0, struct vp_report_opts *ro)
{
	/* The wall view's events are derived from the recorded ones, also when one of
	 * them is asked for by name (-e blocked). */
	bool wall_event = a->event && (!strcmp(a->event, "wall") || !strcmp(a->event, "running") ||
				       !strcmp(a->event, "runnable") || !strcmp(a->event, "blocked"));
	if (a->wall && base) {
		fprintf(stderr, "viprof report: --wall has no --diff form; compare two runs' --wall tables\n");
		return false;
	}
	if (a->wall || wall_event) {
		char werr[256] = "";
		int w = vp_wall__add_events(p, werr, sizeof(werr));
		if (w < 0) {
			fprintf(stderr, "viprof report: --wall: %s: %s\n", dir0, werr);
			return false;
		}
		ro->sort_event = w;
	}
	vp_report__add_views(p, a->format, base, a->wall || wall_event);
	if (a->event) {
		ro->sort_event = -1;
		for (int e = 0; e < p->nevents; e++)
			if (!strcmp(p->events[e].name, a->event))
				ro->sort_event = e;
		if (ro->sort_event < 0) {
			char list[600] = "";
			for (int e = 0; e < p->nevents; e++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", e ? ", " : "", p->events[e].name);
			fprintf(stderr, "viprof report: event '%s' was not recorded in %s; recorded: %s\n", a->event, dir0, list);
			return false;
		}
	}
	return true;
}

/* The views (names, filters, cuts) come last, on the events as the report draws them;
 * the base of a diff gets the same view so that both sides name frames alike. Replaces
 * *p and *base by their views; returns 0, or the exit status after printing why. */
static int apply_views(struct report_args *a, struct vp_profile **p, struct vp_profile **base, int ndirs,
		       int sort_event)
{
	a->xf.norm = a->norm == 1 || (a->norm < 0 && (*base || ndirs > 1));
	a->xf.minwidth_event = sort_event;
	a->xf.minwidth_by_thread = a->format == VP_REPORT_FOLDED && a->threads;
	a->xf.merge_tiers = a->merge_tiers == 1 || (a->merge_tiers < 0 && *base);
	if (!vp_xform__active(&a->xf))
		return 0;
	char xerr[512] = "";
	struct vp_profile *v = vp_profile__transform(*p, &a->xf, xerr, sizeof(xerr)), *bv = NULL;
	/* The base's minimum width is of the same event, by name: its events may be
	 * numbered differently. */
	struct vp_xform bxf = a->xf;
	bxf.minwidth_event = -1;
	for (int e = 0; *base && e < (*base)->nevents; e++)
		if (!strcmp((*base)->events[e].name, (*p)->events[sort_event].name))
			bxf.minwidth_event = e;
	if (v && *base && !(bv = vp_profile__transform(*base, &bxf, xerr, sizeof(xerr)))) {
		vp_profile__free(v);
		v = NULL;
	}
	if (!v) {
		fprintf(stderr, "viprof report: %s\n", xerr);
		return errno == EINVAL ? 2 : 1;
	}
	vp_profile__free(*p);
	*p = v;
	if (bv) {
		vp_profile__free(*base);
		*base = bv;
	}
	if (!vp_profile__has_samples(*p)) {
		fprintf(stderr, "viprof report: no samples left after --include/--exclude; loosen the patterns\n");
		return 1;
	}
	return 0;
}

/* Opens the output, refuses binary data on a terminal, writes the report and repeats its
 * warnings on stderr; returns 0 or 1 after printing why. */
static int write_report(const struct report_args *a, struct vp_profile *p, const struct vp_profile *base,
			struct vp_report_opts *ro)
{
	struct vp_out o = { 0 };
	bool out_open = false;
	int ret = 1;
	int r = vp_out__open(&o, a->output);
	if (r) {
		fprintf(stderr, "viprof report: cannot write '%s': %s; choose another -o path\n", a->output, strerror(-r));
		goto cleanup;
	}
	out_open = true;
	/* Colour only for a person at a terminal who has not opted out. */
	const char *nc = getenv("NO_COLOR");
	ro->color = o.tty && !a->no_color && !(nc && *nc);
	if (o.tty && (a->format == VP_REPORT_PPROF)) {
		fprintf(stderr, "viprof report: not writing gzip data to a terminal; add -o FILE.pb.gz\n");
		goto cleanup;
	}
	if (o.tty && a->format == VP_REPORT_JFR) {
		fprintf(stderr, "viprof report: not writing JFR's binary data to a terminal; add -o FILE.jfr\n");
		goto cleanup;
	}
	if (a->format == VP_REPORT_JFR && vp_jfr_refuses_event(p->events[ro->sort_event].name)) {
		fprintf(stderr, "viprof report: JFR output holds CPU samples (jdk.ExecutionSample); '%s' is not time on the CPU: choose a CPU event with -e (e.g. -e %s)\n",
			p->events[ro->sort_event].name, p->events[0].name);
		goto cleanup;
	}

	r = vp_report__write(p, base, a->format, a->wall && !a->event, &o, ro);
	int cr = vp_out__close(&o);
	out_open = false;
	if (r || cr) {
		fprintf(stderr, "viprof report: writing the %s report to %s failed: %s\n", vp_report_format_name(a->format),
			a->output ? a->output : "standard output", strerror(-(r ? r : cr)));
		goto cleanup;
	}
	/* The text report prints warnings itself; the file formats carry them inside (not
	 * folded: it has no place for them), and a person running the command should see
	 * them, also when the report goes to standard output (stderr stays apart). */
	for (const char *w = p->warnings; a->format != VP_REPORT_TEXT && w && *w;) {
		size_t l = strcspn(w, "\n");
		fprintf(stderr, "viprof report: warning: %.*s\n", (int)l, w);
		w += l + (w[l] == '\n');
	}
	ret = 0;
cleanup:
	if (out_open)
		vp_out__close(&o);
	return ret;
}

int cmd_report(int argc, char **argv)
{
	struct report_args a;
	bool help;
	defaults(&a);
	int ret = parse_args(argc, argv, &a, &help);
	if (ret)
		return ret;
	if (help) {
		usage(stdout);
		return 0;
	}
	static const char *const default_dirs[] = { DEFAULT_DIR };
	const char *const *dirs = a.ndirs ? a.dirs : default_dirs;
	int ndirs = a.ndirs ? a.ndirs : 1;

	struct vp_session_opts so = {
		.pids = a.npids ? a.pids : NULL, .npids = a.npids,
		.tids = a.ntids ? a.tids : NULL, .ntids = a.ntids,
		.comm = a.comm, .container = a.container, .t_from = a.t_from, .t_to = a.t_to,
		.map_mode_flat = a.map_flat, .hv_syms = a.hv_syms, .vthreads = a.vthreads,
	};
	vp_report__session_opts(a.format, &so);
	struct vp_profile *p = vp_profile__new(), *base = NULL;
	ret = 1;
	if (!p) {
		fprintf(stderr, "viprof report: out of memory\n");
		goto cleanup;
	}
	if (!load_profiles(&a, dirs, ndirs, &so, p, &base))
		goto cleanup;
	struct vp_report_opts ro = { .top = a.top, .sort = a.sort, .layers = a.layers, .title = a.title,
				     .threads = a.threads, .reverse = a.reverse };
	if (!pick_event(&a, p, base, dirs[0], &ro))
		goto cleanup;
	if ((ret = apply_views(&a, &p, &base, ndirs, ro.sort_event)))
		goto cleanup;
	ret = write_report(&a, p, base, &ro);
cleanup:
	vp_profile__free(p);
	vp_profile__free(base);
	return ret;
}
