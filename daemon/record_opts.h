/* The options of 'viprof record': one struct of defaults and one parser that checks
 * every value (events are only split here; hv-glue parses and live-checks them). */
#ifndef VIPROF_DAEMON_RECORD_OPTS_H
#define VIPROF_DAEMON_RECORD_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define RECORD_DEFAULT_FREQ 999          /* odd, so sampling does not beat with HZ=1000 timers */
#define RECORD_DEFAULT_DIR "viprof.session"
#define RECORD_MAX_PIDS 64
#define RECORD_MAX_FREQ 100000

enum record_target { RECORD_TARGET_NONE, RECORD_TARGET_ALL, RECORD_TARGET_PIDS, RECORD_TARGET_LAUNCH };

struct record_opts {
	const char *events;      /* -e list as written, or NULL for the default event */
	uint64_t freq;           /* -F */
	uint64_t period;         /* -c; 0 unless given */
	bool callchain;          /* -g */
	bool fp_walk;            /* --stack-walk fp: frame pointers only (no unwind tables) */
	enum record_target target;
	pid_t pids[RECORD_MAX_PIDS];
	int npids;
	char **cmd;              /* -- CMD...: argv of the command, NULL-terminated */
	double duration;         /* -d seconds; 0 = until the command exits or SIGINT */
	const char *output;      /* -o */
	const char *backend;     /* auto|bpf|perf */
	bool force;
	bool no_jit;
	bool off_cpu;            /* --off-cpu: the switch tracer charges off-CPU intervals */
	const char *xen_pmu_mode; /* --xen-pmu-mode, or NULL to leave it */
	bool quiet;
	bool help;               /* --help was given and printed */
};

void record_opts__defaults(struct record_opts *o);
/* Parses argv (argv[0] = "record"). 0 on success (check o->help), -EINVAL with a
 * one-line message in err otherwise. Uses getopt_long, so it resets optind. */
int record_opts__parse(struct record_opts *o, int argc, char **argv, char *err, size_t errlen);
void record_opts__usage(FILE *f);

#endif
