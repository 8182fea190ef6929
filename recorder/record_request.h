/* What a recording is asked to do: the options of 'viprof record' (parsed by
 * cli/record_opts.h) and of the service's requests, given to vp_recorder__start
 * (recorder/recorder.h). The strings and arrays it points to must outlive the recorder. */
#ifndef VIPROF_RECORDER_RECORD_REQUEST_H
#define VIPROF_RECORDER_RECORD_REQUEST_H

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

struct vp_record_opts {
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
	/* --jvm-attach: which running JVMs (-a, -p) get the agent. */
	enum { RECORD_JVM_ALL, RECORD_JVM_NONE, RECORD_JVM_UIDS, RECORD_JVM_PIDS } jvm_attach;
	bool jvm_attach_given;   /* the user chose; -a then does not warn about every user */
	uid_t jvm_uids[RECORD_MAX_PIDS];
	pid_t jvm_pids[RECORD_MAX_PIDS];
	int jvm_n;
	bool off_cpu;            /* --off-cpu: the switch tracer charges off-CPU intervals */
	bool no_steal_est;       /* --no-steal-estimate: no event hypervisor-estimated
				  * (common/steal_est.h; on by default) */
	uint64_t alloc_bytes;    /* -e alloc[/period=BYTES/]: the JVM agent samples allocations
				  * every BYTES on average (0: off); not a perf event */
	bool lock;               /* -e lock[/period=NS/]: the agent records contended locks */
	uint64_t lock_ns;        /* waits shorter than this are not recorded */
	const char *xen_pmu_mode; /* --xen-pmu-mode, or NULL to leave it */
	bool quiet;
	bool help;               /* --help was given and printed */
	/* Set by the program driving the recorder, not by options: */
	const char *cmdline;     /* the command line as given, for META cmdline; may be NULL */
	pid_t launched;          /* RECORD_TARGET_LAUNCH: the child the caller launched and
				  * holds before exec (common/launch.h); cmd names it */
	const char *agent;       /* the JVM agent to load (NULL: none found, a warning) */
	FILE *log;               /* where notes and warnings go; NULL: stderr */
	bool user_only;          /* every event ":u", no kernel symbols: what the kernel lets
				  * an unprivileged user sample (the service sets it for them) */
	bool unwind_sampled_only; /* -a: unwind tables only for processes seen in samples, none
				  * built per exec or fork (the service's continuous recording) */
	size_t ring_pages;       /* the sampler's buffer per CPU, in pages; 0: its default */
	bool switches_if_off_cpu; /* no context-switch tracing unless off_cpu: steal is shared out
				  * in proportion instead of exactly (the service's whole-VM
				  * recordings, which must cost nothing per context switch) */
	bool watch_jvms;         /* -a: JVMs that start while recording get the agent within
				  * seconds (record_jvm__watch), not at the next session (the
				  * service's continuous recording) */
};

/* The defaults of 'viprof record': the default rate, directory and backend. */
void vp_record_opts__defaults(struct vp_record_opts *o);

#endif
