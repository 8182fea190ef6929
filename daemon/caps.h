/* The capabilities viprof serve works with, for a service confined to a bounding set
 * (packaging/viprof.service): which one does what, and a line at start for each one
 * the service lacks, because without some of them it still runs but does less without
 * a word (no CAP_CHECKPOINT_RESTORE: every user stack ends at the first frame without
 * a frame pointer; no CAP_SYSLOG: kernel frames are unnamed and a root client is told
 * to "run as root"). */
#ifndef VIPROF_SERVICE_CAPS_H
#define VIPROF_SERVICE_CAPS_H

#include <stdint.h>
#include <stdio.h>

struct vp_svc_cap {
	int nr;                /* CAP_* of linux/capability.h */
	const char *name;      /* "CAP_BPF" */
	const char *without;   /* what the service cannot do without it, and what follows */
};

/* The table, in the order of packaging/viprof.service's CapabilityBoundingSet. */
extern const struct vp_svc_cap vp_svc_caps[];
extern const int vp_svc_ncaps;

/* The capabilities of the table missing from the effective set capeff (a mask as in
 * /proc/self/status's CapEff), ignoring those the kernel does not know (above
 * last_cap): one line each to log, "viprof serve: warning: no CAP_X: ...". The count. */
int vp_svc_caps__report(uint64_t capeff, int last_cap, FILE *log);

/* The same for this process, when it runs as root (as a user, a service has none of
 * them anyway and says so elsewhere). */
int vp_svc_caps__check(FILE *log);

#endif
