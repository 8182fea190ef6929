/* One name for the hypervisor (issue 30). Unit: the kernel log's forms, quoted from the
 * kernels that wrote them, parse to the same facts, and the decision puts the kernel's
 * word first with CPUID's outer host as a detail. Live (argv[1] = viprof, argv[2] =
 * "live"): `viprof probe`'s hypervisor row and its "why", the error for -e cycles (where
 * cycles cannot be sampled), record's header, the session's metadata and its report all say the
 * name vp_hv_identity__get() decides, and that name is the kernel log's where it is
 * readable. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hv-glue/probe.h"
#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

static void decide(const char *cpuid, const char *log, const char *name, const char *outer)
{
	struct vp_probe_klog k;
	struct vp_hv_identity id;
	if (log)
		ASSERT_OK(vp_probe__parse_klog(log, &k));
	vp_hv_identity__decide(cpuid, log ? &k : NULL, &id);
	ASSERT_STREQ(id.name, name);
	ASSERT_STREQ(id.outer_host, outer);
	ASSERT_STREQ(id.cpuid_name, cpuid ? cpuid : "none");
	ASSERT_EQ(id.klog_read, log != NULL);
}

static void unit(void)
{
	struct vp_probe_klog k;

	/* A 6.18 PVM guest (the machine): the new wording, no "pvm-pv: detected". */
	const char *pvm618 = "[    0.000000] Hypervisor detected: PVM\n"
			     "[    0.000000] kvm-clock: Using msrs 4b564d01 and 4b564d00\n"
			     "[    0.241770] pvm-pv: running under PVM (pv-lite)\n";
	ASSERT_OK(vp_probe__parse_klog(pvm618, &k));
	ASSERT_STREQ(k.kernel_hv, "PVM");
	ASSERT_TRUE(k.pvm_guest);
	ASSERT_FALSE(k.pvm_absent);
	ASSERT_FALSE(k.pvm_host);
	/* "running under PVM" alone says so too. */
	ASSERT_OK(vp_probe__parse_klog("[    0.2] pvm-pv: running under PVM (pv-lite)\n", &k));
	ASSERT_TRUE(k.pvm_guest);
	ASSERT_STREQ(k.kernel_hv, "");
	/* Older PVM guests. */
	ASSERT_OK(vp_probe__parse_klog("[    0.000000] Hypervisor detected: KVM\n"
				       "[    0.120917] Booting paravirtualized kernel on PVM\n", &k));
	ASSERT_STREQ(k.kernel_hv, "KVM");
	ASSERT_TRUE(k.pvm_guest);
	ASSERT_OK(vp_probe__parse_klog("[    0.3] pvm-pv: detected, 49/49 sites patched\n", &k));
	ASSERT_TRUE(k.pvm_guest);
	/* This project's build VM: a KVM guest that hosts PVM guests and is not one. */
	const char *host = "[    0.000000] Hypervisor detected: KVM\n"
			   "[    0.096370] Booting paravirtualized kernel on KVM\n"
			   "[    0.252516] pvm-pv: not detected, 0/49 sites patched\n"
			   "[    0.366010] kvm-pvm: loaded (native=1 pcid=1 pge_off=1 emul_batch=1024 emul_ibpb=0)\n";
	ASSERT_OK(vp_probe__parse_klog(host, &k));
	ASSERT_STREQ(k.kernel_hv, "KVM");
	ASSERT_FALSE(k.pvm_guest);
	ASSERT_TRUE(k.pvm_absent);
	ASSERT_TRUE(k.pvm_host);
	ASSERT_EQ(vp_probe__parse_klog(NULL, &k), -EINVAL);

	/* The kernel's word first, CPUID's other name a detail. */
	decide("bhyve", pvm618, "PVM", "bhyve");
	decide("none", pvm618, "PVM", "");        /* a PVM guest of a bare-metal host: CPUID sees none */
	decide("KVM", pvm618, "PVM", "KVM");
	decide("KVM", host, "KVM", "");
	decide("bhyve", "[    0.0] Hypervisor detected: KVM\n", "KVM", "bhyve");
	decide("unknown", "[    0.0] Hypervisor detected: ACRN\n", "ACRN", "");
	decide("Xen", "[    0.0] Linux version 6.1\n", "Xen", "");   /* the log says nothing: CPUID */
	decide("bhyve", NULL, "bhyve", "");                           /* log unreadable: CPUID is all there is */
	decide(NULL, NULL, "none", "");
	printf("test-hv-identity: ok\n");
}

/* The value of the first line of text that starts with key (after blanks), up to '\n'. */
static char *row(const char *text, const char *key, char *buf, size_t len)
{
	const char *p = strstr(text, key);
	if (!p)
		FAIL("no '%s' in:\n%s", key, text);
	p += strlen(key);
	p += strspn(p, " \":");
	snprintf(buf, len, "%.*s", (int)strcspn(p, "\"\n"), p);
	return buf;
}

static void live(const char *viprof)
{
	const struct vp_hv_identity *id = vp_hv_identity__get();
	char cmd[2 * PATH_MAX + 256], v[256], tmp[] = "/tmp/vp-fresh-hvid-XXXXXX";
	fprintf(stderr, "identity: %s (CPUID %s, outer host '%s', kernel log %s)\n", id->name, id->cpuid_name,
		id->outer_host, id->klog_read ? "read" : "not readable");
	if (!id->klog_read)
		SKIP("the kernel log is not readable here (not root, kernel.dmesg_restrict=1): the name comes from CPUID "
		     "alone, which the unit entry covers");
	/* The kernel's word, read apart from the product's reader. */
	char *klog = run_sh_read("dmesg 2>/dev/null", NULL);
	struct vp_probe_klog k;
	ASSERT_OK(vp_probe__parse_klog(klog, &k));
	free(klog);
	if (k.pvm_guest)
		ASSERT_STREQ(id->name, "PVM");
	else if (*k.kernel_hv)
		ASSERT_STREQ(id->name, k.kernel_hv);

	snprintf(cmd, sizeof(cmd), "%s probe 2>&1", viprof);
	char *probe = run_sh_read(cmd, NULL);
	ASSERT_STREQ(row(probe, "\n  hypervisor ", v, sizeof(v)), id->name);
	bool vm = strcmp(id->name, "none") != 0;
	char why[512];
	row(probe, "\n  why ", why, sizeof(why));
	if (vm && strstr(why, "VM ("))
		ASSERT_CONTAINS(why, id->name);
	bool cycles = strstr(probe, "\n  cycles                     ok") != NULL;
	free(probe);

	ASSERT_NOT_NULL(mkdtemp(tmp));
	/* A command with CPU time to sample (0.2 s of its own), so the session has a report. */
	char self[PATH_MAX];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ASSERT_GT(sl, 0);
	self[sl] = '\0';
	snprintf(cmd, sizeof(cmd), "%s record -o %s/s -- %s spin 2>&1", viprof, tmp, self);
	char *rec = run_sh_read(cmd, NULL);
	ASSERT_CONTAINS(rec, "sampling ");
	if (vm && strstr(rec, "VM ("))
		ASSERT_CONTAINS(rec, id->name);
	if (*id->outer_host && strcmp(id->outer_host, id->name))
		ASSERT_NULL(strstr(rec, id->outer_host));
	free(rec);
	snprintf(cmd, sizeof(cmd), "%s/s/meta.json", tmp);
	char *meta = test_slurp_str(cmd);
	ASSERT_STREQ(row(meta, "\"probe.hypervisor\"", v, sizeof(v)), id->name);
	free(meta);
	/* The report of the session says it too. */
	snprintf(cmd, sizeof(cmd), "%s report %s/s 2>&1", viprof, tmp);
	char *rep = run_sh_read(cmd, NULL);
	ASSERT_STREQ(row(rep, "\n# hypervisor", v, sizeof(v)), id->name);
	free(rep);

	if (!cycles) {
		snprintf(cmd, sizeof(cmd), "%s record -e cycles -o %s/c -- /bin/true 2>&1", viprof, tmp);
		char *err = run_sh_read(cmd, NULL);
		ASSERT_CONTAINS(err, "'cycles'");
		if (vm && strstr(err, "VM ("))
			ASSERT_CONTAINS(err, id->name);
		if (*id->outer_host && strcmp(id->outer_host, id->name))
			ASSERT_NULL(strstr(err, id->outer_host));
		free(err);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (run_sh(cmd, 50))
		fprintf(stderr, "could not remove %s\n", tmp);
	printf("test-hv-identity live: every message says %s\n", id->name);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "spin")) {
		struct timespec a, b;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
		do
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
		while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 200000000L);
		return 0;
	}
	if (argc > 2 && !strcmp(argv[2], "live"))
		live(argv[1]);
	else
		unit();
	return 0;
}
