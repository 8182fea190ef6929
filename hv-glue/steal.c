/* Steal time per vCPU from /proc/stat. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdio.h>
#include <sys/utsname.h>
#include <zlib.h>

#include "hv-glue/steal.h"
#include "common/steal_clock.h"
#include "common/util.h"

/* Ticks of USER_HZ to ns without overflowing for any realistic uptime. */
static uint64_t ticks_to_ns(uint64_t t, long hz)
{
	return t / (uint64_t)hz * 1000000000ull + t % (uint64_t)hz * 1000000000ull / (uint64_t)hz;
}

int vp_steal__parse(const char *text, long clk_tck, uint64_t *steal_ns, int max_cpus)
{
	if (!text || clk_tck <= 0 || !steal_ns || max_cpus <= 0)
		return -EINVAL;
	memset(steal_ns, 0, sizeof(*steal_ns) * (size_t)max_cpus);
	int n = 0;
	bool any = false;
	for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		/* "cpuN user nice system idle iowait irq softirq steal guest guest_nice";
		 * the aggregate "cpu " line has no number and is skipped. */
		if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9')
			continue;
		char *p;
		unsigned long cpu = strtoul(line + 3, &p, 10);
		if (*p != ' ' && *p != '\t')
			continue;
		any = true;
		uint64_t v = 0;
		int col = 0;
		for (; col < 8; col++) {
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p < '0' || *p > '9')
				break;  /* Old kernels (< 2.6.11) stop before steal: it counts as 0. */
			v = strtoull(p, &p, 10);
		}
		/* A CPU past the array still proves that the gaps below it are real CPUs. */
		if (cpu >= (unsigned long)max_cpus) {
			n = max_cpus;
			continue;
		}
		steal_ns[cpu] = col == 8 ? ticks_to_ns(v, clk_tck) : 0;
		if ((int)cpu + 1 > n)
			n = (int)cpu + 1;
	}
	if (!any)
		return -EINVAL;
	return n;
}

int vp_steal__read(uint64_t *steal_ns, int max_cpus)
{
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* /proc/stat grows with the CPU and interrupt count; read it whole. */
	size_t cap = 16384, len = 0;
	char *buf = malloc(cap);
	int ret;
	if (!buf) {
		ret = -ENOMEM;
		goto cleanup;
	}
	for (;;) {
		if (len + 1 >= cap && vp_grow((void **)&buf, &cap, cap + 1, 1)) {
			ret = -ENOMEM;
			goto cleanup;
		}
		ssize_t k = read(fd, buf + len, cap - len - 1);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto cleanup;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	buf[len] = '\0';
	ret = vp_steal__parse(buf, sysconf(_SC_CLK_TCK), steal_ns, max_cpus);
cleanup:
	free(buf);
	close(fd);
	return ret;
}

/* "CONFIG_NAME=y" as a whole line of text. */
static bool config_yes(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, name, n) && l[n] == '=' && l[n + 1] == 'y')
			return true;
	return false;
}

int vp_steal__accounting_from(const char *text)
{
	if (!text || !strstr(text, "CONFIG_"))
		return -EINVAL;
	if (!config_yes(text, "CONFIG_PARAVIRT_TIME_ACCOUNTING"))
		return 0;
	return config_yes(text, "CONFIG_IRQ_TIME_ACCOUNTING") ? VP_STEAL_ACCT_IRQ : VP_STEAL_ACCT_STEAL;
}

int vp_steal__accounting(void)
{
	static int cached = -1000;
	char path[320];
	struct utsname u;
	size_t cap = 1 << 20, len = 0;
	char *text;
	gzFile f = NULL;
	int ret;

	if (cached != -1000)
		return cached;
	if (!(text = malloc(cap)))
		return -ENOMEM;
	/* gzread reads plain files as they are, so one reader serves both. */
	if (uname(&u) == 0) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = gzopen(path, "rb");
	}
	if (!f)
		f = gzopen("/proc/config.gz", "rb");
	if (!f) {
		free(text);
		return cached = -ENOENT;
	}
	for (int n; len < cap - 1 && (n = gzread(f, text + len, (unsigned)(cap - 1 - len))) > 0;)
		len += (size_t)n;
	gzclose(f);
	text[len] = '\0';
	ret = vp_steal__accounting_from(text);
	free(text);
	return cached = ret == -EINVAL ? -ENOENT : ret;
}

int vp_steal__runtime(int pid, int tid, uint64_t *ns)
{
	char path[96], buf[128];
	ssize_t n;
	int fd;

	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ESRCH ? -ENOENT : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = '\0';
	*ns = strtoull(buf, NULL, 10);
	return 0;
}

int vp_steal__total(uint64_t *ns)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	uint64_t *s;
	int n;

	if (ncpu < 1)
		ncpu = 1;
	if (!(s = calloc((size_t)ncpu, sizeof(*s))))
		return -ENOMEM;
	n = vp_steal__read(s, (int)ncpu);
	if (n >= 0) {
		*ns = 0;
		for (int i = 0; i < n; i++)
			*ns += s[i];
		n = 0;
	}
	free(s);
	return n;
}

int vp_steal__clock_runs_from(uint64_t steal_since_boot_ns, char *why, size_t whylen)
{
	if (vp_steal_clock__ran(steal_since_boot_ns, 0))
		return 1;
	vp_steal_clock__why(why, whylen);
	return 0;
}

int vp_steal__clock_runs(char *why, size_t whylen)
{
	uint64_t total;
	int err = vp_steal__total(&total);

	if (err) {
		if (why && whylen)
			snprintf(why, whylen, "cannot read /proc/stat to tell whether a steal clock runs: %s; "
				 "mount /proc", strerror(-err));
		return err;
	}
	return vp_steal__clock_runs_from(total, why, whylen);
}
