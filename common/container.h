/* Which container a process runs in, as the host sees it: its cgroup path, the
 * container runtime's id in that path, a Kubernetes pod UID, and (for namespaces made
 * without a runtime, e.g. with unshare) its pid namespace. One set of rules, used by the
 * recorder to pick a process's cgroup and by reports to name and filter containers. */
#ifndef VIPROF_COMMON_CONTAINER_H
#define VIPROF_COMMON_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vp_container_id {
	char id[72];     /* "" on the host; a runtime's 64-hex id, or "pidns-<inode>" */
	char pod[40];    /* a Kubernetes pod UID (dashed), or "" */
};

/* From /proc/PID/cgroup text (one "hierarchy:controllers:path" per line): the path that
 * says most about the process's container: one that holds a container id, else the
 * unified (v2) path, else the first v1 path that is not "/". Writes it NUL-terminated
 * into out ("/" when there is none); returns its length. */
size_t vp_container__pick_cgroup(const char *text, char *out, size_t outlen);

/* The container that a cgroup path names: the innermost path component that is (or is
 * a runtime's "docker-", "cri-containerd-", "crio-", "libpod-" ... "<id>.scope" form
 * of) 64 hex digits; and a pod UID from a kubepods "pod<uid>" component (systemd's
 * "_" read as "-"). When the path names none and the process lives in a pid namespace
 * other than the recorder's (pidns != host_pidns, both known), the id is
 * "pidns-<pidns>": a container made without a runtime is still one. */
void vp_container__describe(const char *cgroup, uint64_t pidns, uint64_t host_pidns, struct vp_container_id *out);

/* Does a report's --container FILTER select this process? FILTER is a prefix of the
 * container id (at least 4 characters, as `docker ps` abbreviates), a prefix of the pod
 * UID, a cgroup path (exactly, or a parent of it), or "host" for processes in no
 * container. */
bool vp_container__matches(const char *filter, const char *cgroup, const struct vp_container_id *c);

#endif
