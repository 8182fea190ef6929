/* Hypervisor identity, PMU presence and live event tests, shared by events and probe. */
#define _GNU_SOURCE  /* strerrorname_np */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sched.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "hv-glue/hv_internal.h"
#include "hv-glue/identity.h"

/* Hypervisor CPUID signatures (leaf 0x40000000 EBX, ECX, EDX) and the names we show. */
static const struct {
	const char *sig;
	const char *name;
} hv_sigs[] = {
	{ "KVMKVMKVM", "KVM" },        { "XenVMMXenVMM", "Xen" },      { "Microsoft Hv", "Hyper-V" },
	{ "VMwareVMware", "VMware" },  { "TCGTCGTCGTCG", "QEMU-TCG" }, { "ACRNACRNACRN", "ACRN" },
	{ "bhyve bhyve ", "bhyve" },   { "VBoxVBoxVBox", "VirtualBox" }, { " lrpepyh  vr", "Parallels" },
	{ "QNXQVMBSQG", "QNX" },       { "Linux KVM Hv", "KVM" },      { "EVMMEVMMEVMM", "EVMM" },
};

static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

const char *vp_hv__name(char *sig, size_t siglen, bool *hv_bit)
{
	const char *name = NULL;
	bool bit = false;
	if (sig && siglen)
		sig[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	if (__get_cpuid(1, &a, &b, &c, &d))
		bit = (c >> 31) & 1;
	if (bit) {
		/* KVM and Xen also answer at 0x40000100 when they emulate Hyper-V at the first
		 * leaf (enlightenments for Windows guests); the real hypervisor wins. */
		for (unsigned base = 0x40000000; base <= 0x40000100; base += 0x100) {
			char s[13];
			__cpuid(base, a, b, c, d);
			memcpy(s, &b, 4);
			memcpy(s + 4, &c, 4);
			memcpy(s + 8, &d, 4);
			s[12] = '\0';
			if (base == 0x40000000 && sig && siglen)
				snprintf(sig, siglen, "%s", s);
			for (size_t i = 0; i < sizeof(hv_sigs) / sizeof(hv_sigs[0]); i++) {
				if (strncmp(s, hv_sigs[i].sig, 12))
					continue;
				if (!name || !strcmp(name, "Hyper-V"))
					name = hv_sigs[i].name;
			}
		}
	}
#endif
	if (hv_bit)
		*hv_bit = bit;
	if (name)
		return name;
	/* Xen PV guests and dom0 may not show the signature; the xen driver's sysfs does. */
	char t[32];
	if (read_line("/sys/hypervisor/type", t, sizeof(t)) && !strcmp(t, "xen"))
		return "Xen";
	return bit ? "unknown" : "none";
}

int vp_probe__parse_klog(const char *log, struct vp_probe_klog *out)
{
	memset(out, 0, sizeof(*out));
	if (!log)
		return -EINVAL;
	const char *h = strstr(log, "Hypervisor detected: ");
	if (h) {
		h += strlen("Hypervisor detected: ");
		size_t n = strcspn(h, "\r\n");
		while (n && h[n - 1] == ' ')
			n--;
		snprintf(out->kernel_hv, sizeof(out->kernel_hv), "%.*s", (int)n, h);
	}
	/* Kernels have said "PVM guest" in several ways; any of them is the kernel's word. */
	out->pvm_guest = !strcmp(out->kernel_hv, "PVM") || strstr(log, "paravirtualized kernel on PVM") != NULL;
	for (const char *d = log; (d = strstr(d, "pvm-pv: ")); d++) {
		const char *w = d + strlen("pvm-pv: ");
		if (!strncmp(w, "detected", 8) || !strncmp(w, "running under PVM", 17))
			out->pvm_guest = true;
		else if (!strncmp(w, "not detected", 12))
			out->pvm_absent = true;
	}
	out->pvm_host = strstr(log, "kvm-pvm: loaded") != NULL;
	return 0;
}

void vp_hv_identity__decide(const char *cpuid_name, const struct vp_probe_klog *klog, struct vp_hv_identity *out)
{
	const char *cpuid = cpuid_name && *cpuid_name ? cpuid_name : "none";
	const char *name = cpuid;
	snprintf(out->cpuid_name, sizeof(out->cpuid_name), "%s", cpuid);
	out->outer_host[0] = '\0';
	out->klog_read = klog != NULL;
	if (klog)
		out->klog = *klog;
	else
		memset(&out->klog, 0, sizeof(out->klog));
	/* The kernel's word first: it names the hypervisor that runs it, even where
	 * user-mode CPUID shows an outer host or none at all (a PVM guest on bare metal). */
	if (klog && klog->pvm_guest)
		name = "PVM";
	else if (klog && *klog->kernel_hv)
		name = klog->kernel_hv;
	snprintf(out->name, sizeof(out->name), "%s", name);
	/* CPUID's name is a detail when it is a hypervisor's and not the same one. */
	if (strcmp(cpuid, name) && strcmp(cpuid, "none") && strcmp(cpuid, "unknown"))
		snprintf(out->outer_host, sizeof(out->outer_host), "%s", cpuid);
}

/* The kernel log through syslog(2) READ_ALL: root, or kernel.dmesg_restrict=0. */
static bool read_klog(struct vp_probe_klog *k)
{
	int len = (int)syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	if (len <= 0 || len > (64 << 20))
		return false;
	char *buf = malloc((size_t)len + 1);
	if (!buf)
		return false;
	int n = (int)syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, len);
	bool ok = n > 0;
	if (ok) {
		buf[n] = '\0';
		vp_probe__parse_klog(buf, k);
	}
	free(buf);
	return ok;
}

static struct vp_hv_identity identity;
static pthread_once_t identity_once = PTHREAD_ONCE_INIT;

static void identity_init(void)
{
	char sig[16];
	bool bit;
	struct vp_probe_klog k;
	const char *cpuid = vp_hv__name(sig, sizeof(sig), &bit);
	bool have_log = read_klog(&k);
	vp_hv_identity__decide(cpuid, have_log ? &k : NULL, &identity);
	snprintf(identity.signature, sizeof(identity.signature), "%s", sig);
	identity.hv_bit = bit;
}

const struct vp_hv_identity *vp_hv_identity__get(void)
{
	pthread_once(&identity_once, identity_init);
	return &identity;
}

const char *vp_hv__pmu_device(void)
{
	static const char *const devs[] = { "cpu", "cpu_core", "cpu_atom" };
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		char p[96];
		snprintf(p, sizeof(p), "/sys/bus/event_source/devices/%s", devs[i]);
		if (access(p, F_OK) == 0)
			return devs[i];
	}
	return NULL;
}

int vp_hv__try_event(uint32_t type, uint64_t config, bool sampling, bool exclude_kernel, bool exclude_user)
{
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = type;
	attr.config = config;
	attr.disabled = 1;
	attr.exclude_kernel = exclude_kernel;
	attr.exclude_user = exclude_user;
	if (sampling) {
		/* A sampling event needs an overflow interrupt, which a counting-only (v)PMU
		 * cannot give; the period is irrelevant because the event is never enabled. */
		attr.sample_period = 10000000;
		attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	}
	int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Makes the calling thread do what event (type, config) counts, a few times. Returns
 * false when this event cannot be provoked here (then nothing is known). */
static bool provoke(uint32_t type, uint64_t config)
{
	if (type != PERF_TYPE_SOFTWARE)
		return false;
	switch (config) {
	case PERF_COUNT_SW_CONTEXT_SWITCHES: {
		struct timespec ts = { 0, 100000 };
		for (int i = 0; i < 3; i++)
			nanosleep(&ts, NULL);
		return true;
	}
	case PERF_COUNT_SW_PAGE_FAULTS:
	case PERF_COUNT_SW_PAGE_FAULTS_MIN: {
		long psz = sysconf(_SC_PAGESIZE);
		volatile char *m = mmap(NULL, (size_t)psz * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return false;
		for (int i = 0; i < 4; i++)
			m[i * psz] = 1;
		munmap((void *)m, (size_t)psz * 4);
		return true;
	}
	case PERF_COUNT_SW_CPU_CLOCK:
	case PERF_COUNT_SW_TASK_CLOCK: {
		struct timespec a, b;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
		do
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
		while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 200000);
		return true;
	}
	case PERF_COUNT_SW_CPU_MIGRATIONS: {
		/* Hop between two CPUs this thread may use, then put its mask back. */
		cpu_set_t old, one;
		int cpus[2], n = 0;
		if (sched_getaffinity(0, sizeof(old), &old))
			return false;
		for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
			if (CPU_ISSET(c, &old))
				cpus[n++] = c;
		if (n < 2)
			return false;
		for (int i = 0; i < 4; i++) {
			CPU_ZERO(&one);
			CPU_SET(cpus[i & 1], &one);
			sched_setaffinity(0, sizeof(one), &one);
		}
		sched_setaffinity(0, sizeof(old), &old);
		return true;
	}
	default:
		return false;
	}
}

int vp_hv__user_mode_counts(uint32_t type, uint64_t config)
{
	struct perf_event_attr attr;
	uint64_t v = 0;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = type;
	attr.config = config;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	bool tried = provoke(type, config);
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		v = 0;
	close(fd);
	return !tried || v > 0;
}

void vp_hv__available(char *buf, size_t len)
{
	size_t n = 0;
	if (len)
		buf[0] = '\0';
	for (int i = 0; i < vp_hv_nr_events; i++) {
		const struct vp_hv_event *e = &vp_hv_events[i];
		const char *mod = "";
		int r = vp_hv__try_event(e->type, e->config, true, false, false);
		/* perf_event_paranoid=2 still lets anyone sample their own threads in user
		 * mode; list such events with the ":u" that makes them work. */
		if ((r == -EACCES || r == -EPERM) && vp_hv__try_event(e->type, e->config, true, true, false) == 0) {
			mod = ":u";
			r = 0;
			/* Some software events are counted in the kernel's own context (context
			 * switches, migrations): their ":u" opens fine and counts nothing. */
			if (vp_hv__user_mode_counts(e->type, e->config) == 0)
				continue;
		}
		if (r)
			continue;
		int k = snprintf(buf + n, n < len ? len - n : 0, "%s%s%s", n ? ", " : "", e->name, mod);
		if (k > 0)
			n += (size_t)k;
	}
	if (n == 0 && len)
		snprintf(buf, len, "none");
}

const char *vp_hv__errname(int err)
{
	if (err < 0)
		err = -err;
	const char *s = strerrorname_np(err);
	return s ? s : "E?";
}
