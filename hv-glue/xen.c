/* Xen PMU mode through /sys/hypervisor/pmu/pmu_mode (see xen.h). */
#include "hv-glue/xen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <unistd.h>

static const char *const xen_modes[] = { "off", "self", "hv", "all" };

void vp_xen__explain(int e, const char *path, const char *what, char *err, size_t errlen)
{
	if (e == EBUSY)
		snprintf(err, errlen, "Xen refused to %s the PMU mode (%s): Xen changes to or from mode 'all' only while "
			 "no domain uses its vPMU; stop profiling inside the guests (or boot them with vpmu off), or use "
			 "--xen-pmu-mode hv, which leaves the guests their vPMUs", what, strerror(e));
	else if (e == EOPNOTSUPP)
		snprintf(err, errlen, "Xen refused to %s the PMU mode (%s): Xen shares the PMU with dom0 only for a PV "
			 "dom0, and a PVH dom0 gets this answer whatever vpmu= says; boot dom0 as PV (dom0=pv), or profile "
			 "inside each guest", what, strerror(e));
	else if (e == ENOENT)
		snprintf(err, errlen, "cannot %s Xen's PMU mode: %s does not exist; this is not a Xen "
			 "dom0 (or the xen sysfs driver is not loaded); run viprof in dom0 of a Xen host", what, path);
	else if (e == EACCES || e == EPERM)
		snprintf(err, errlen, "cannot %s Xen's PMU mode in %s: %s; run as root in dom0", what, path, strerror(e));
	else if (e == EINVAL)
		snprintf(err, errlen, "Xen refused to %s the PMU mode (%s); boot Xen with vpmu=1 (or vpmu=bts) "
			 "so that a vPMU exists", what, strerror(e));
	else
		snprintf(err, errlen, "cannot %s Xen's PMU mode in %s: %s", what, path, strerror(e));
}

int vp_xen__get_pmu_mode_at(const char *path, char *mode, size_t len, char *err, size_t errlen)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		vp_xen__explain(e, path, "read", err, errlen);
		return -e;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		int e = errno;

		close(fd);
		vp_xen__explain(e, path, "read", err, errlen);
		return -e;
	}
	close(fd);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(mode, len, "%s", buf);
	return 0;
}

int vp_xen__set_pmu_mode_at(const char *path, const char *mode, char *err, size_t errlen)
{
	char line[16], now[32];
	size_t i;
	int fd, ret;

	for (i = 0; i < sizeof(xen_modes) / sizeof(xen_modes[0]); i++)
		if (!strcmp(mode, xen_modes[i]))
			break;
	if (i == sizeof(xen_modes) / sizeof(xen_modes[0])) {
		snprintf(err, errlen, "unknown Xen PMU mode '%s'; use off, self, hv or all", mode);
		return -EINVAL;
	}
	/* The kernel compares the first len-1 bytes, i.e. it expects echo's newline. */
	snprintf(line, sizeof(line), "%s\n", mode);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		vp_xen__explain(e, path, "set", err, errlen);
		return -e;
	}
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line)) {
		int e = errno ? errno : EIO;

		close(fd);
		vp_xen__explain(e, path, "set", err, errlen);
		return -e;
	}
	if (close(fd)) {
		int e = errno;

		vp_xen__explain(e, path, "set", err, errlen);
		return -e;
	}
	if ((ret = vp_xen__get_pmu_mode_at(path, now, sizeof(now), err, errlen)))
		return ret;
	if (strcmp(now, mode)) {
		snprintf(err, errlen, "Xen kept PMU mode '%s' after being asked for '%s'; check the "
			 "hypervisor's log (xl dmesg) for the reason", now, mode);
		return -EIO;
	}
	return 0;
}

int vp_xen__get_pmu_mode(char *mode, size_t len, char *err, size_t errlen)
{
	return vp_xen__get_pmu_mode_at(VP_XEN_PMU_MODE_PATH, mode, len, err, errlen);
}

int vp_xen__set_pmu_mode(const char *mode, char *err, size_t errlen)
{
	return vp_xen__set_pmu_mode_at(VP_XEN_PMU_MODE_PATH, mode, err, errlen);
}

/* The mode to put back: saved before the first change, restored once. */
static char saved_path[256];
static char saved_line[40];
static volatile sig_atomic_t saved_pending;
static pid_t saved_pid;

int vp_xen__restore_pmu_mode(void)
{
	size_t n = 0;
	int fd, ret = 0;

	if (!saved_pending || getpid() != saved_pid)
		return 0;
	saved_pending = 0;
	while (saved_line[n])
		n++;
	fd = open(saved_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, saved_line, n) != (ssize_t)n)
		ret = -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

static void restore_at_exit(void)
{
	vp_xen__restore_pmu_mode();
}

int vp_xen__push_pmu_mode_at(const char *path, const char *mode, char *err, size_t errlen)
{
	static bool registered;
	char old[32];
	int ret;

	if (strlen(path) >= sizeof(saved_path)) {
		snprintf(err, errlen, "Xen PMU mode path %s is too long", path);
		return -ENAMETOOLONG;
	}
	if (!saved_pending && (ret = vp_xen__get_pmu_mode_at(path, old, sizeof(old), err, errlen)))
		return ret;
	if ((ret = vp_xen__set_pmu_mode_at(path, mode, err, errlen)))
		return ret;
	if (saved_pending || !strcmp(old, mode))
		return 0;   /* already saved by an earlier push, or nothing changed */
	snprintf(saved_path, sizeof(saved_path), "%s", path);
	snprintf(saved_line, sizeof(saved_line), "%s\n", old);
	saved_pid = getpid();
	saved_pending = 1;
	if (!registered)
		registered = atexit(restore_at_exit) == 0;
	return 0;
}

int vp_xen__push_pmu_mode(const char *mode, char *err, size_t errlen)
{
	return vp_xen__push_pmu_mode_at(VP_XEN_PMU_MODE_PATH, mode, err, errlen);
}
