/* The service's capabilities: see caps.h. */
#define _GNU_SOURCE
#include "daemon/caps.h"

#include <inttypes.h>
#include <stdbool.h>
#include <linux/capability.h>
#include <unistd.h>

#include "common/util.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

const struct vp_svc_cap vp_svc_caps[] = {
	{ CAP_BPF, "CAP_BPF", "the BPF sampler cannot be loaded: recordings fall back to perf_event_open, whose "
	  "stacks follow frame pointers only" },
	{ CAP_PERFMON, "CAP_PERFMON", "perf events cannot be opened for other users' processes or the whole VM "
	  "(perf_event_paranoid decides as for any user)" },
	{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE", "other users' processes cannot be read (their memory for the stack walker, "
	  "their mappings and files under /proc/PID)" },
	{ CAP_SETUID, "CAP_SETUID", "the service cannot become a user to check a request as the kernel would: every "
	  "user's request is refused" },
	{ CAP_SETGID, "CAP_SETGID", "the service cannot take a user's groups to check a request as the kernel would: "
	  "every user's request is refused" },
	{ CAP_KILL, "CAP_KILL", "the helpers that run as a user (the request's check, the JVM attach) cannot be "
	  "stopped at their deadline" },
	{ CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH", "files users keep in directories only they may read (their "
	  "programs and libraries) cannot be opened: their symbols and unwind tables are missing" },
	{ CAP_CHECKPOINT_RESTORE, "CAP_CHECKPOINT_RESTORE", "mapped files cannot be opened through /proc/PID/map_files, "
	  "so no unwind table is built: every user stack ends at the first frame without a frame pointer" },
	{ CAP_SYSLOG, "CAP_SYSLOG", "/proc/kallsyms shows every address as 0: kernel frames are unnamed, and root's own "
	  "recordings are told to run as root" },
	{ CAP_CHOWN, "CAP_CHOWN", "whole-VM recordings (--http, --continuous) cannot give a JVM's user the directory its "
	  "agent writes code maps into: that JVM's JIT frames may be unnamed" },
};
const int vp_svc_ncaps = (int)(sizeof(vp_svc_caps) / sizeof(vp_svc_caps[0]));

int vp_svc_caps__report(uint64_t capeff, int last_cap, FILE *log)
{
	int missing = 0;
	for (int i = 0; i < vp_svc_ncaps; i++) {
		const struct vp_svc_cap *c = &vp_svc_caps[i];
		if (c->nr > last_cap || (capeff >> c->nr) & 1)
			continue;
		missing++;
		if (log)
			fprintf(log, "viprof serve: warning: no %s: %s; add %s to the service's capabilities "
				"(CapabilityBoundingSet= of packaging/viprof.service)\n", c->name, c->without, c->name);
	}
	return missing;
}

int vp_svc_caps__check(FILE *log)
{
	if (geteuid() != 0)
		return 0;
	uint64_t eff = 0;
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	bool found = false;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %" SCNx64, &eff) == 1) {
			found = true;
			break;
		}
	if (f)
		fclose(f);
	if (!found)
		return 0;   /* cannot tell: say nothing rather than something wrong */
	int last = vp_read_int_file("/proc/sys/kernel/cap_last_cap", CAP_LAST_CAP);
	return vp_svc_caps__report(eff, last, log);
}
