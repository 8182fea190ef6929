/* The probe: collects what this machine or VM can sample, once, into one struct that
 * the text and JSON writers and the session metadata all read. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "common/json.h"
#include "common/steal_clock.h"
#include "hv-glue/events.h"
#include "hv-glue/hv_internal.h"
#include "hv-glue/probe.h"
#include "hv-glue/steal.h"

#define PROBE_MAX_EVENTS 32
#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT 21
#define CAP_SYSLOG_BIT 34
#define CAP_PERFMON_BIT 38
#define CAP_BPF_BIT 39

struct probe_event {
	const char *name;
	bool hardware;
	int count_err;   /* 0 or -errno of a counting perf_event_open */
	int sample_err;  /* 0 or -errno of a sampling perf_event_open */
	bool user_only;  /* works only with exclude_kernel (perf_event_paranoid, no CAP_PERFMON) */
};

struct vp_probe {
	/* Hypervisor. */
	const char *hypervisor;
	char hv_signature[16];
	bool hv_bit;
	char sys_hv_type[32];     /* /sys/hypervisor/type, "" if absent */
	char xen_pmu_mode[32];    /* /sys/hypervisor/pmu/pmu_mode, "" if absent */
	bool xen_dom0;            /* /proc/xen/capabilities says control_d */
	char dmi_product[128], dmi_vendor[128];
	char acpi_oem[8];         /* OEM id of the firmware's ACPI tables, "" if unreadable */
	const char *vmm;          /* the VMM behind the hypervisor when it can be told ("Firecracker"), or NULL */
	/* The kernel's view (its log; root or kernel.dmesg_restrict=0): the hypervisor it
	 * detected, PVM, and the CPUID name when it differs (an outer host seen through). */
	struct vp_probe_klog klog;
	bool klog_read;
	const char *outer_host;   /* CPUID's name when the kernel runs on another hypervisor */
	/* CPU and PMU virtualization. */
	char cpu_vendor[16], cpu_brand[64];
	bool intel, amd;
	int arch_pmu_version, gp_counters, gp_width, fixed_counters, fixed_width;  /* Intel leaf 0xA */
	bool amd_perfctr_core, amd_perfmon_v2;
	int amd_v2_counters;
	const char *pmu_device;   /* "cpu", "cpu_core", ... or NULL */
	struct probe_event events[PROBE_MAX_EVENTS];
	int nr_events;
	bool hw_sampling;         /* cycles can be sampled */
	bool hw_counting;         /* cycles can at least be counted */
	/* BPF and privileges. */
	int bpf_load_err;         /* 0 or -errno of a 2-instruction socket filter */
	int bpf_perf_event;       /* libbpf_probe_bpf_prog_type(PERF_EVENT): 1, 0 or -errno */
	int unpriv_bpf_disabled;  /* -1 if unreadable */
	bool btf;
	int paranoid, kptr_restrict;
	uint64_t cap_eff;
	bool cap_known;
	/* Steal time. */
	bool steal_column;
	int steal_cpus;
	uint64_t steal_total_ns;
	/* Kernel. */
	char kernel[256], machine[65];
	/* Conclusions. */
	char default_event[64], default_why[512];
	const char *backend;      /* "bpf", "perf" or "none" */
	char recommendation[2048];
};

static bool read_line(const char *path, char *buf, size_t len)
{
	buf[0] = '\0';
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

static int read_int(const char *path, int dflt)
{
	char b[32];
	return read_line(path, b, sizeof(b)) ? atoi(b) : dflt;
}

static void probe_cpu(struct vp_probe *p)
{
	snprintf(p->cpu_vendor, sizeof(p->cpu_vendor), "unknown");
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d, max, maxext;
	__cpuid(0, max, b, c, d);
	memcpy(p->cpu_vendor, &b, 4);
	memcpy(p->cpu_vendor + 4, &d, 4);
	memcpy(p->cpu_vendor + 8, &c, 4);
	p->cpu_vendor[12] = '\0';
	p->intel = !strcmp(p->cpu_vendor, "GenuineIntel");
	p->amd = !strcmp(p->cpu_vendor, "AuthenticAMD") || !strcmp(p->cpu_vendor, "HygonGenuine");
	__cpuid(0x80000000, maxext, b, c, d);
	if (maxext >= 0x80000004) {
		unsigned r[12];
		for (unsigned i = 0; i < 3; i++)
			__cpuid(0x80000002 + i, r[i * 4], r[i * 4 + 1], r[i * 4 + 2], r[i * 4 + 3]);
		char brand[49];
		memcpy(brand, r, 48);
		brand[48] = '\0';
		char *s = brand;
		while (*s == ' ')
			s++;
		size_t n = strlen(s);
		while (n && s[n - 1] == ' ')
			s[--n] = '\0';
		snprintf(p->cpu_brand, sizeof(p->cpu_brand), "%s", s);
	}
	/* Intel architectural perfmon: the hypervisor reports what it virtualizes here
	 * (KVM: version 0 and no counters when the guest has pmu=off). */
	if (p->intel && max >= 0xa) {
		__cpuid(0xa, a, b, c, d);
		p->arch_pmu_version = a & 0xff;
		p->gp_counters = (a >> 8) & 0xff;
		p->gp_width = (a >> 16) & 0xff;
		if (p->arch_pmu_version > 1) {
			p->fixed_counters = d & 0x1f;
			p->fixed_width = (d >> 5) & 0xff;
		}
	}
	if (p->amd) {
		if (maxext >= 0x80000001) {
			__cpuid(0x80000001, a, b, c, d);
			p->amd_perfctr_core = (c >> 23) & 1;
		}
		if (maxext >= 0x80000022) {
			__cpuid(0x80000022, a, b, c, d);
			p->amd_perfmon_v2 = a & 1;
			p->amd_v2_counters = b & 0xf;
		}
	}
#endif
}

static void probe_events(struct vp_probe *p)
{
	for (int i = 0; i < vp_hv_nr_events && p->nr_events < PROBE_MAX_EVENTS; i++) {
		const struct vp_hv_event *e = &vp_hv_events[i];
		/* The probe tests the events people ask for; the exotic ones stay in the parser. */
		static const char *const shown[] = { "cycles", "instructions", "cache-misses", "branch-misses",
						     "cpu-clock", "task-clock", "page-faults", "context-switches" };
		bool keep = false;
		for (size_t k = 0; k < sizeof(shown) / sizeof(shown[0]); k++)
			keep |= !strcmp(e->name, shown[k]);
		if (!keep)
			continue;
		struct probe_event *pe = &p->events[p->nr_events++];
		pe->name = e->name;
		pe->hardware = e->type == PERF_TYPE_HARDWARE;
		pe->count_err = vp_hv__try_event(e->type, e->config, false, false, false);
		if (pe->count_err == -EACCES || pe->count_err == -EPERM) {
			/* Not privileged for the kernel; user mode of our own threads may work, and
			 * if it fails for another reason (no PMU), that reason is the real one. */
			int r = vp_hv__try_event(e->type, e->config, false, true, false);
			pe->user_only = r == 0;
			if (r != -EACCES && r != -EPERM)
				pe->count_err = r;
		}
		pe->sample_err = pe->count_err ? pe->count_err
					       : vp_hv__try_event(e->type, e->config, true, pe->user_only, false);
		if (!strcmp(e->name, "cycles")) {
			p->hw_counting = pe->count_err == 0;
			p->hw_sampling = pe->sample_err == 0;
		}
	}
}

static void probe_bpf(struct vp_probe *p)
{
	/* r0 = 0; exit: the smallest program the verifier accepts. */
	struct bpf_insn insns[2] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insns = (uint64_t)(uintptr_t)insns;
	attr.insn_cnt = 2;
	attr.license = (uint64_t)(uintptr_t)"GPL";
	int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	if (fd >= 0) {
		close(fd);
		p->bpf_load_err = 0;
	} else {
		p->bpf_load_err = -errno;
	}
	p->bpf_perf_event = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL);
	p->unpriv_bpf_disabled = read_int("/proc/sys/kernel/unprivileged_bpf_disabled", -1);
	p->btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
}

static void probe_privileges(struct vp_probe *p)
{
	p->paranoid = read_int("/proc/sys/kernel/perf_event_paranoid", 2);
	p->kptr_restrict = read_int("/proc/sys/kernel/kptr_restrict", -1);
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "CapEff:", 7)) {
			p->cap_eff = strtoull(line + 7, NULL, 16);
			p->cap_known = true;
		}
	}
	if (f)
		fclose(f);
}

static bool has_cap(const struct vp_probe *p, int bit)
{
	return p->cap_known && (p->cap_eff >> bit) & 1;
}

static void probe_steal(struct vp_probe *p)
{
	/* The aggregate line tells whether this kernel has the steal column at all. */
	char first[512];
	if (read_line("/proc/stat", first, sizeof(first))) {
		int cols = 0;
		char *save, *tok = strtok_r(first, " ", &save);
		while ((tok = strtok_r(NULL, " ", &save)))
			cols++;
		p->steal_column = cols >= 8;
	}
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	if (ncpu < 1)
		ncpu = 1;
	uint64_t *ns = calloc((size_t)ncpu, sizeof(*ns));
	if (!ns)
		return;
	int n = vp_steal__read(ns, (int)ncpu);
	p->steal_cpus = n > 0 ? n : 0;
	for (int i = 0; i < n; i++)
		p->steal_total_ns += ns[i];
	free(ns);
}

/* The hypervisor-specific way to turn the vPMU on, for the recommendation. */
static const char *vpmu_advice(const struct vp_probe *p)
{
	const char *hv = p->hypervisor;
	/* Firecracker's CPUID signature is KVM's, but its answer is not QEMU's pmu=on. */
	if (p->vmm && !strcmp(p->vmm, "Firecracker"))
		return "Firecracker has no x86 vPMU to turn on (it clears CPUID's performance-monitoring leaves): "
		       "for hardware events run the workload under QEMU/KVM with -cpu host,pmu=on, or on bare metal";
	/* In a cloud the tenant cannot change the hypervisor; the instance type decides. */
	if (strstr(p->dmi_vendor, "Amazon") || strstr(p->dmi_product, "EC2"))
		return "EC2: use a .metal instance or a full-socket instance size, which expose the PMU";
	if (strstr(p->dmi_vendor, "Google") || strstr(p->dmi_product, "Google Compute Engine"))
		return "GCE: create the VM with --performance-monitoring-unit=standard on a machine series that supports it";
	if (!strcmp(hv, "KVM"))
		return "KVM: -cpu host,pmu=on; libvirt: <pmu state='on'/>";
	if (!strcmp(hv, "Xen"))
		return "Xen: boot Xen with vpmu=1 (or vpmu=ipc|arch) and set /sys/hypervisor/pmu/pmu_mode to self";
	if (!strcmp(hv, "VMware"))
		return "VMware: enable 'Virtualize CPU performance counters' (vpmc.enable = TRUE)";
	if (!strcmp(hv, "Hyper-V"))
		return "Hyper-V: Set-VMProcessor -Perfmon @(\"pmu\") on the host";
	if (!strcmp(hv, "QEMU-TCG"))
		return "QEMU TCG emulates no PMU: run the VM with KVM acceleration and -cpu host,pmu=on";
	return "ask the hypervisor or cloud provider for an instance type with a virtual PMU";
}

static void conclude(struct vp_probe *p)
{
	struct sampler_event ev;
	if (vp_events__default(&ev, p->default_why, sizeof(p->default_why)) == 0)
		snprintf(p->default_event, sizeof(p->default_event), "%s", ev.name);
	else
		snprintf(p->default_event, sizeof(p->default_event), "none");

	bool root_like = has_cap(p, CAP_SYS_ADMIN_BIT);
	bool can_bpf = p->bpf_load_err == 0 && p->bpf_perf_event == 1 &&
		       (root_like || (has_cap(p, CAP_BPF_BIT) && has_cap(p, CAP_PERFMON_BIT)));
	/* The perf backend needs only perf_event_open of the default event; with
	 * perf_event_paranoid=2 that is user mode of the user's own processes. */
	bool can_perf = strcmp(p->default_event, "none") != 0;
	bool user_only = strstr(p->default_event, ":u") != NULL;
	p->backend = can_bpf ? "bpf" : can_perf ? "perf" : "none";

	bool vm = strcmp(p->hypervisor, "none") != 0;
	/* The hypervisor's one name (vp_hv_identity__get), as every other message says it;
	 * the VMM (Firecracker) has its own row and its own advice. */
	const char *label = p->hypervisor;
	bool no_vpmu = p->vmm && !strcmp(p->vmm, "Firecracker");
	size_t n = 0, len = sizeof(p->recommendation);
	char *r = p->recommendation;
#define ADD(...) do { int _k = snprintf(r + n, n < len ? len - n : 0, __VA_ARGS__); if (_k > 0) n += (size_t)_k; } while (0)
	if (!strcmp(p->backend, "none")) {
		ADD("viprof cannot sample here: %s.", p->default_why);
	} else if (user_only) {
		ADD("As this user (perf_event_paranoid=%d, no CAP_PERFMON/CAP_BPF) viprof can sample only the user mode of "
		    "your own processes: %s with the perf backend, no kernel stacks, no -a. Run as root (or "
		    "'sysctl kernel.perf_event_paranoid=1') for whole-system profiles with the bpf backend.",
		    p->paranoid, p->default_event);
		if (!p->hw_counting && p->pmu_device == NULL && vm)
			ADD(no_vpmu ? " This VM (%s) exposes no PMU, so hardware events are not available even as root: %s."
				    : " This VM (%s) exposes no PMU, so hardware events are not available even as root; for them, "
				      "ask the hypervisor admin to enable vPMU (%s).", label, vpmu_advice(p));
	} else if (p->hw_sampling) {
		ADD("This %s%s%s samples hardware events: viprof will sample cycles with the %s backend "
		    "(-e cache-misses, branch-misses, ... work too).", vm ? "VM (" : "machine", vm ? label : "",
		    vm ? ") has a vPMU and" : "", p->backend);
	} else if (p->hw_counting) {
		ADD("This %s%s%s counts hardware events but cannot sample them (no overflow interrupt): viprof will sample "
		    "cpu-clock (hrtimer) with the %s backend; 'viprof stat' can still count cycles. For sampling: %s.",
		    vm ? "VM (" : "machine", vm ? label : "", vm ? ")" : "", p->backend, vpmu_advice(p));
	} else if (vm) {
		if (no_vpmu)
			ADD("This VM (%s) exposes no PMU: viprof will sample cpu-clock (hrtimer) with the %s backend; hardware "
			    "events (cycles, cache-misses) are not available here. %c%s.", label, p->backend,
			    vpmu_advice(p)[0], vpmu_advice(p) + 1);
		else
			ADD("This VM (%s) exposes no PMU: viprof will sample cpu-clock (hrtimer) with the %s backend; hardware "
			    "events (cycles, cache-misses) are not available here. Ask the hypervisor admin to enable vPMU (%s) "
			    "for hardware events.", label, p->backend, vpmu_advice(p));
	} else {
		ADD("This machine has no usable PMU (none registered by the kernel): viprof will sample cpu-clock (hrtimer) "
		    "with the %s backend; check the BIOS and the kernel's perf support for hardware events.", p->backend);
	}
	if (!strcmp(p->backend, "perf") && !user_only)
		ADD(" BPF is not usable (%s), so the slower perf ring backend is used; root or CAP_BPF+CAP_PERFMON enable it.",
		    p->bpf_load_err ? vp_hv__errname(p->bpf_load_err) : "no perf_event programs");
	if (p->steal_total_ns)
		ADD(" The hypervisor has stolen %.1f s of vCPU time since boot: viprof records steal per vCPU so reports "
		    "can show it.", (double)p->steal_total_ns / 1e9);
	else if (!vp_steal_clock__ran(p->steal_total_ns, 0))
		ADD(" " VP_STEAL_NOT_MEASURED ": the hypervisor shows no steal clock, so reports say so rather than 0; "
		    "with the bpf backend they estimate the host's share from late sampler timers instead "
		    "(event hypervisor-estimated).");
	if (p->kptr_restrict > 0 && !has_cap(p, CAP_SYSLOG_BIT))
		ADD(" kptr_restrict=%d hides kernel addresses: run as root for kernel symbols.", p->kptr_restrict);
	if (*p->xen_pmu_mode && strcmp(p->xen_pmu_mode, "self") && strcmp(p->xen_pmu_mode, "all"))
		ADD(" Xen pmu_mode is '%s': write 'self' (or 'all' in dom0) to /sys/hypervisor/pmu/pmu_mode.", p->xen_pmu_mode);
#undef ADD
}

struct vp_probe *vp_probe__run(void)
{
	struct vp_probe *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	/* One identity for every message (vp_hv_identity__get): the kernel's own word first. */
	const struct vp_hv_identity *id = vp_hv_identity__get();
	p->hypervisor = id->name;
	snprintf(p->hv_signature, sizeof(p->hv_signature), "%s", id->signature);
	p->hv_bit = id->hv_bit;
	p->klog = id->klog;
	p->klog_read = id->klog_read;
	p->outer_host = *id->outer_host ? id->outer_host : NULL;
	read_line("/sys/hypervisor/type", p->sys_hv_type, sizeof(p->sys_hv_type));
	read_line("/sys/hypervisor/pmu/pmu_mode", p->xen_pmu_mode, sizeof(p->xen_pmu_mode));
	char caps[128];
	p->xen_dom0 = read_line("/proc/xen/capabilities", caps, sizeof(caps)) && strstr(caps, "control_d");
	read_line("/sys/class/dmi/id/product_name", p->dmi_product, sizeof(p->dmi_product));
	read_line("/sys/class/dmi/id/sys_vendor", p->dmi_vendor, sizeof(p->dmi_vendor));
	/* Firecracker has no DMI tables; its ACPI tables carry OEM id FIRECK. */
	if (vp_probe__acpi_oem_at("/sys/firmware/acpi/tables", p->acpi_oem, sizeof(p->acpi_oem)) == 0 &&
	    !strcmp(p->acpi_oem, "FIRECK"))
		p->vmm = "Firecracker";
	probe_cpu(p);
	p->pmu_device = vp_hv__pmu_device();
	probe_events(p);
	probe_bpf(p);
	probe_privileges(p);
	probe_steal(p);
	struct utsname u;
	if (uname(&u) == 0) {
		snprintf(p->kernel, sizeof(p->kernel), "%s", u.release);
		snprintf(p->machine, sizeof(p->machine), "%s", u.machine);
	}
	conclude(p);
	return p;
}

void vp_probe__free(struct vp_probe *p)
{
	free(p);
}

const char *vp_probe__hypervisor(const struct vp_probe *p)
{
	return p->hypervisor;
}

bool vp_probe__hw_events(const struct vp_probe *p)
{
	return p->hw_sampling;
}

const char *vp_probe__recommendation(const struct vp_probe *p)
{
	return p->recommendation;
}

/* "Intel arch perfmon v4, 8 GP x 48 bit, 3 fixed" / "AMD PerfCtrExtCore, PerfMonV2 6 counters" / "none". */
static void pmu_summary(const struct vp_probe *p, char *buf, size_t len)
{
	if (p->intel && p->arch_pmu_version)
		snprintf(buf, len, "Intel arch perfmon v%d, %d GP x %d bit, %d fixed", p->arch_pmu_version, p->gp_counters,
			 p->gp_width, p->fixed_counters);
	else if (p->amd && (p->amd_perfctr_core || p->amd_perfmon_v2)) {
		if (p->amd_perfmon_v2)
			snprintf(buf, len, "AMD%s, PerfMonV2 %d counters", p->amd_perfctr_core ? " PerfCtrExtCore" : "",
				 p->amd_v2_counters);
		else
			snprintf(buf, len, "AMD PerfCtrExtCore (6 counters)");
	} else if (p->amd && !p->pmu_device)
		/* The legacy counters exist only if the kernel found them: it registers no
		 * PMU when the hypervisor gives none ("PMU not available due to virtualization"). */
		snprintf(buf, len, "no PerfCtrExtCore, no PerfMonV2 in CPUID, and the kernel registered no PMU: no counters");
	else if (p->amd)
		snprintf(buf, len, "no PerfCtrExtCore, no PerfMonV2 in CPUID (at most the 4 legacy counters)");
	else
		snprintf(buf, len, "none advertised in CPUID");
}

static void event_status(const struct probe_event *e, char *buf, size_t len)
{
	const char *u = e->user_only ? " (user mode only: not privileged for the kernel)" : "";
	if (e->count_err == -EACCES || e->count_err == -EPERM)
		snprintf(buf, len, "not permitted (%s)", vp_hv__errname(e->count_err));
	else if (e->count_err)
		snprintf(buf, len, "not supported (%s)", vp_hv__errname(e->count_err));
	else if (e->sample_err)
		snprintf(buf, len, "counts, cannot sample (%s)%s", vp_hv__errname(e->sample_err), u);
	else
		snprintf(buf, len, "ok%s", u);
}

void vp_probe__foreach_meta(const struct vp_probe *p, void (*cb)(void *ctx, const char *key, const char *value), void *ctx)
{
	if (!p || !cb)
		return;
	char b[256];
	cb(ctx, "hypervisor", p->hypervisor);
	if (p->vmm)
		cb(ctx, "hypervisor.vmm", p->vmm);
	if (p->outer_host)
		cb(ctx, "hypervisor.outer_host", p->outer_host);
	if (*p->acpi_oem)
		cb(ctx, "acpi.oem", p->acpi_oem);
	if (*p->hv_signature)
		cb(ctx, "hypervisor.signature", p->hv_signature);
	if (*p->xen_pmu_mode)
		cb(ctx, "hypervisor.xen_pmu_mode", p->xen_pmu_mode);
	if (p->xen_dom0)
		cb(ctx, "hypervisor.xen_domain", "dom0");
	if (*p->dmi_product)
		cb(ctx, "dmi.product", p->dmi_product);
	if (*p->dmi_vendor)
		cb(ctx, "dmi.vendor", p->dmi_vendor);
	cb(ctx, "cpu.vendor", p->cpu_vendor);
	if (*p->cpu_brand)
		cb(ctx, "cpu.model", p->cpu_brand);
	pmu_summary(p, b, sizeof(b));
	cb(ctx, "pmu.cpuid", b);
	cb(ctx, "pmu.device", p->pmu_device ? p->pmu_device : "none");
	cb(ctx, "pmu.hw_sampling", p->hw_sampling ? "yes" : "no");
	for (int i = 0; i < p->nr_events; i++) {
		char key[96];
		snprintf(key, sizeof(key), "event.%s", p->events[i].name);
		event_status(&p->events[i], b, sizeof(b));
		cb(ctx, key, b);
	}
	cb(ctx, "default_event", p->default_event);
	cb(ctx, "default_event.why", p->default_why);
	cb(ctx, "backend", p->backend);
	snprintf(b, sizeof(b), "%d", p->paranoid);
	cb(ctx, "perf_event_paranoid", b);
	snprintf(b, sizeof(b), "%d", p->kptr_restrict);
	cb(ctx, "kptr_restrict", b);
	cb(ctx, "steal.column", p->steal_column ? "yes" : "no");
	snprintf(b, sizeof(b), "%llu", (unsigned long long)p->steal_total_ns);
	cb(ctx, "steal.total_ns_at_start", b);
	cb(ctx, "steal.clock", vp_steal_clock__ran(p->steal_total_ns, 0) ? "runs" : "none");
	cb(ctx, "kernel", p->kernel);
	cb(ctx, "machine", p->machine);
}

/* ---- writers ---- */

static void caps_string(const struct vp_probe *p, char *buf, size_t len)
{
	if (!p->cap_known) {
		snprintf(buf, len, "unknown");
		return;
	}
	snprintf(buf, len, "CapEff=%016llx (CAP_SYS_ADMIN %s, CAP_PERFMON %s, CAP_BPF %s, CAP_SYS_PTRACE %s)",
		 (unsigned long long)p->cap_eff, has_cap(p, CAP_SYS_ADMIN_BIT) ? "yes" : "no",
		 has_cap(p, CAP_PERFMON_BIT) ? "yes" : "no", has_cap(p, CAP_BPF_BIT) ? "yes" : "no",
		 has_cap(p, CAP_SYS_PTRACE_BIT) ? "yes" : "no");
}

static const char *bpf_load_string(const struct vp_probe *p, char *buf, size_t len)
{
	if (p->bpf_load_err)
		snprintf(buf, len, "fails (%s)", vp_hv__errname(p->bpf_load_err));
	else
		snprintf(buf, len, "ok");
	return buf;
}

static const char *bpf_pe_string(const struct vp_probe *p)
{
	return p->bpf_perf_event == 1 ? "supported" : p->bpf_perf_event == 0 ? "not supported" : vp_hv__errname(p->bpf_perf_event);
}

static void kv(FILE *f, const char *k, const char *v)
{
	fprintf(f, "  %-26s %s\n", k, v);
}

int vp_probe__write_text(const struct vp_probe *p, FILE *f)
{
	char b[512], b2[64];
	fprintf(f, "Hypervisor\n");
	kv(f, "hypervisor", p->hypervisor);
	if (p->vmm)
		kv(f, "VMM", p->vmm);
	kv(f, "CPUID hypervisor bit", p->hv_bit ? "set" : "clear");
	kv(f, "CPUID signature", *p->hv_signature ? p->hv_signature : "-");
	if (p->outer_host) {
		snprintf(b, sizeof(b), "CPUID (read in user mode) names %s, an outer host: the kernel runs on %s",
			 p->outer_host, p->hypervisor);
		kv(f, "outer host", b);
	}
	if (p->klog_read)
		kv(f, "kernel's hypervisor", *p->klog.kernel_hv ? p->klog.kernel_hv : "- (not in the kernel log)");
	/* What the kernel said about PVM, both ways: a guest (the hypervisor row says PVM,
	 * and the outer host row what user-mode CPUID names), or not one, and a host. */
	if (p->klog.pvm_guest || p->klog.pvm_absent || p->klog.pvm_host) {
		snprintf(b, sizeof(b), "%s%s%s",
			 p->klog.pvm_guest ? "this kernel runs as a PVM guest (kernel log)"
			 : p->klog.pvm_absent ? "not a PVM guest (pvm-pv: not detected)" : "",
			 (p->klog.pvm_guest || p->klog.pvm_absent) && p->klog.pvm_host ? "; " : "",
			 p->klog.pvm_host ? "this VM runs PVM guests itself (kvm-pvm loaded)" : "");
		kv(f, "PVM", b);
	}
	kv(f, "/sys/hypervisor/type", *p->sys_hv_type ? p->sys_hv_type : "-");
	if (*p->xen_pmu_mode)
		kv(f, "Xen pmu_mode", p->xen_pmu_mode);
	if (!strcmp(p->hypervisor, "Xen"))
		kv(f, "Xen domain", p->xen_dom0 ? "dom0 (control domain)" : "domU");
	kv(f, "DMI product", *p->dmi_product ? p->dmi_product : "-");
	kv(f, "DMI vendor", *p->dmi_vendor ? p->dmi_vendor : "-");

	fprintf(f, "\nCPU and PMU\n");
	kv(f, "CPU vendor", p->cpu_vendor);
	kv(f, "CPU model", *p->cpu_brand ? p->cpu_brand : "-");
	pmu_summary(p, b, sizeof(b));
	kv(f, "PMU in CPUID", b);
	kv(f, "perf PMU device", p->pmu_device ? p->pmu_device : "none (no /sys/bus/event_source/devices/cpu)");

	fprintf(f, "\nEvents (perf_event_open, this thread, any CPU)\n");
	for (int i = 0; i < p->nr_events; i++) {
		event_status(&p->events[i], b, sizeof(b));
		kv(f, p->events[i].name, b);
	}
	kv(f, "default event", p->default_event);
	kv(f, "why", p->default_why);

	fprintf(f, "\nBPF and privileges\n");
	kv(f, "BPF program load", bpf_load_string(p, b2, sizeof(b2)));
	kv(f, "BPF perf_event programs", bpf_pe_string(p));
	snprintf(b, sizeof(b), "%d", p->unpriv_bpf_disabled);
	kv(f, "unprivileged_bpf_disabled", p->unpriv_bpf_disabled < 0 ? "-" : b);
	kv(f, "BTF (vmlinux)", p->btf ? "yes" : "no");
	snprintf(b, sizeof(b), "%d", p->paranoid);
	kv(f, "perf_event_paranoid", b);
	snprintf(b, sizeof(b), "%d", p->kptr_restrict);
	kv(f, "kptr_restrict", b);
	caps_string(p, b, sizeof(b));
	kv(f, "capabilities", b);
	kv(f, "sampler backend", p->backend);

	fprintf(f, "\nSteal time\n");
	kv(f, "/proc/stat steal column", p->steal_column ? "yes" : "no");
	if (vp_steal_clock__ran(p->steal_total_ns, 0)) {
		snprintf(b, sizeof(b), "%.2f s over %d CPUs", (double)p->steal_total_ns / 1e9, p->steal_cpus);
		kv(f, "steal since boot", b);
	} else {
		char why[512];
		vp_steal_clock__why(why, sizeof(why));
		fprintf(f, "  %s\n", why);
	}

	fprintf(f, "\nKernel\n");
	kv(f, "release", p->kernel);
	kv(f, "machine", p->machine);

	fprintf(f, "\nRecommendation:\n  %s\n", p->recommendation);
	return ferror(f) ? -EIO : 0;
}

static void jkey(FILE *f, int indent, bool *first, const char *k)
{
	fprintf(f, "%s\n%*s", *first ? "" : ",", indent, "");
	*first = false;
	vp_json_fputs(f, k, 0);
	fputs(": ", f);
}

static void jstr(FILE *f, int indent, bool *first, const char *k, const char *v)
{
	jkey(f, indent, first, k);
	if (v)
		vp_json_fputs(f, v, 0);
	else
		fputs("null", f);
}

static void jint(FILE *f, int indent, bool *first, const char *k, long long v)
{
	jkey(f, indent, first, k);
	fprintf(f, "%lld", v);
}

static void jbool(FILE *f, int indent, bool *first, const char *k, bool v)
{
	jkey(f, indent, first, k);
	fputs(v ? "true" : "false", f);
}

int vp_probe__write_json(const struct vp_probe *p, FILE *f)
{
	bool top = true, s;
	char b[512];
	fputc('{', f);

	jkey(f, 2, &top, "hypervisor");
	fputc('{', f);
	s = true;
	jstr(f, 4, &s, "name", p->hypervisor);
	jbool(f, 4, &s, "cpuid_bit", p->hv_bit);
	jstr(f, 4, &s, "cpuid_signature", *p->hv_signature ? p->hv_signature : NULL);
	jstr(f, 4, &s, "sys_hypervisor_type", *p->sys_hv_type ? p->sys_hv_type : NULL);
	jstr(f, 4, &s, "xen_pmu_mode", *p->xen_pmu_mode ? p->xen_pmu_mode : NULL);
	jbool(f, 4, &s, "xen_dom0", p->xen_dom0);
	jstr(f, 4, &s, "dmi_product", *p->dmi_product ? p->dmi_product : NULL);
	jstr(f, 4, &s, "dmi_vendor", *p->dmi_vendor ? p->dmi_vendor : NULL);
	jstr(f, 4, &s, "acpi_oem", *p->acpi_oem ? p->acpi_oem : NULL);
	jstr(f, 4, &s, "vmm", p->vmm);
	jstr(f, 4, &s, "kernel_hypervisor", p->klog_read && *p->klog.kernel_hv ? p->klog.kernel_hv : NULL);
	jstr(f, 4, &s, "outer_host", p->outer_host);
	jbool(f, 4, &s, "pvm_guest", p->klog.pvm_guest);
	jbool(f, 4, &s, "pvm_host", p->klog.pvm_host);
	fputs("\n  }", f);

	jkey(f, 2, &top, "pmu");
	fputc('{', f);
	s = true;
	jstr(f, 4, &s, "cpu_vendor", p->cpu_vendor);
	jstr(f, 4, &s, "cpu_model", *p->cpu_brand ? p->cpu_brand : NULL);
	pmu_summary(p, b, sizeof(b));
	jstr(f, 4, &s, "cpuid_summary", b);
	if (p->intel) {
		jint(f, 4, &s, "intel_arch_perfmon_version", p->arch_pmu_version);
		jint(f, 4, &s, "intel_gp_counters", p->gp_counters);
		jint(f, 4, &s, "intel_gp_width", p->gp_width);
		jint(f, 4, &s, "intel_fixed_counters", p->fixed_counters);
		jint(f, 4, &s, "intel_fixed_width", p->fixed_width);
	}
	if (p->amd) {
		jbool(f, 4, &s, "amd_perfctr_ext_core", p->amd_perfctr_core);
		jbool(f, 4, &s, "amd_perfmon_v2", p->amd_perfmon_v2);
		jint(f, 4, &s, "amd_perfmon_v2_counters", p->amd_v2_counters);
	}
	jstr(f, 4, &s, "perf_device", p->pmu_device);
	jbool(f, 4, &s, "hw_counting", p->hw_counting);
	jbool(f, 4, &s, "hw_sampling", p->hw_sampling);
	fputs("\n  }", f);

	jkey(f, 2, &top, "events");
	fputc('[', f);
	for (int i = 0; i < p->nr_events; i++) {
		const struct probe_event *e = &p->events[i];
		fprintf(f, "%s\n    {", i ? "," : "");
		s = true;
		jstr(f, 6, &s, "name", e->name);
		jbool(f, 6, &s, "hardware", e->hardware);
		jbool(f, 6, &s, "count", e->count_err == 0);
		jstr(f, 6, &s, "count_error", e->count_err ? vp_hv__errname(e->count_err) : NULL);
		jbool(f, 6, &s, "sample", e->sample_err == 0);
		jstr(f, 6, &s, "sample_error", e->sample_err ? vp_hv__errname(e->sample_err) : NULL);
		jbool(f, 6, &s, "user_only", e->user_only);
		fputs("\n    }", f);
	}
	fputs("\n  ]", f);
	jstr(f, 2, &top, "default_event", p->default_event);
	jstr(f, 2, &top, "default_event_why", p->default_why);

	jkey(f, 2, &top, "bpf");
	fputc('{', f);
	s = true;
	jbool(f, 4, &s, "prog_load", p->bpf_load_err == 0);
	jstr(f, 4, &s, "prog_load_error", p->bpf_load_err ? vp_hv__errname(p->bpf_load_err) : NULL);
	jbool(f, 4, &s, "perf_event_prog", p->bpf_perf_event == 1);
	jint(f, 4, &s, "unprivileged_bpf_disabled", p->unpriv_bpf_disabled);
	jbool(f, 4, &s, "btf_vmlinux", p->btf);
	fputs("\n  }", f);

	jkey(f, 2, &top, "privileges");
	fputc('{', f);
	s = true;
	jint(f, 4, &s, "perf_event_paranoid", p->paranoid);
	jint(f, 4, &s, "kptr_restrict", p->kptr_restrict);
	snprintf(b, sizeof(b), "%016llx", (unsigned long long)p->cap_eff);
	jstr(f, 4, &s, "cap_eff", p->cap_known ? b : NULL);
	jbool(f, 4, &s, "cap_sys_admin", has_cap(p, CAP_SYS_ADMIN_BIT));
	jbool(f, 4, &s, "cap_perfmon", has_cap(p, CAP_PERFMON_BIT));
	jbool(f, 4, &s, "cap_bpf", has_cap(p, CAP_BPF_BIT));
	jbool(f, 4, &s, "cap_sys_ptrace", has_cap(p, CAP_SYS_PTRACE_BIT));
	fputs("\n  }", f);
	jstr(f, 2, &top, "backend", p->backend);

	jkey(f, 2, &top, "steal");
	fputc('{', f);
	s = true;
	jbool(f, 4, &s, "column", p->steal_column);
	jint(f, 4, &s, "cpus", p->steal_cpus);
	jint(f, 4, &s, "total_ns", (long long)p->steal_total_ns);
	jbool(f, 4, &s, "nonzero", p->steal_total_ns != 0);
	/* "clock": false means steal is unknown here, not 0 (common/steal_clock.h). */
	jbool(f, 4, &s, "clock", vp_steal_clock__ran(p->steal_total_ns, 0));
	if (!vp_steal_clock__ran(p->steal_total_ns, 0))
		jstr(f, 4, &s, "measured", VP_STEAL_NOT_MEASURED);
	fputs("\n  }", f);

	jkey(f, 2, &top, "kernel");
	fputc('{', f);
	s = true;
	jstr(f, 4, &s, "release", p->kernel);
	jstr(f, 4, &s, "machine", p->machine);
	fputs("\n  }", f);
	jstr(f, 2, &top, "recommendation", p->recommendation);
	fputs("\n}\n", f);
	return ferror(f) ? -EIO : 0;
}

int vp_probe__acpi_oem_at(const char *tables_dir, char *oem, size_t len)
{
	/* Every ACPI table starts with the same header: signature (4), length (4),
	 * revision (1), checksum (1), OEM id (6, space padded). */
	static const char *const tables[] = { "FACP", "DSDT", "APIC", "XSDT", "RSDT" };
	char path[512], hdr[16];

	if (len < 7)
		return -EINVAL;
	oem[0] = '\0';
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tables_dir, tables[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, hdr, sizeof(hdr));
		close(fd);
		if (n < 16)
			continue;
		memcpy(oem, hdr + 10, 6);
		oem[6] = '\0';
		for (int k = 5; k >= 0 && (oem[k] == ' ' || oem[k] == '\0'); k--)
			oem[k] = '\0';
		return 0;
	}
	return -ENOENT;
}
