/* probe knows Firecracker (issue 12): the OEM id of ACPI tables in a stand-in
 * directory ("FIRECK", blank-padded ids, short and missing tables), and, with argv[1]
 * = viprof "live", on this machine: when its ACPI tables say FIRECK, `viprof probe`
 * names Firecracker and does not give QEMU's advice; when the kernel registered no
 * PMU, it does not promise "the 4 legacy counters"; when the kernel log (read here
 * with dmesg, apart from the probe) says whether this kernel is a PVM guest or hosts
 * PVM guests, the probe says the same (issue 23): a guest is named PVM, with the outer
 * host when CPUID names another, and a kernel that found no PVM is not called one. The
 * live entry exits 77 when none of these applies here. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hv-glue/probe.h"
#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

static void table(const char *dir, const char *name, const char *oem, size_t len)
{
	char path[256], hdr[36] = "XXXX\x24\0\0\0\x01\0";
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	memcpy(hdr, name, 4);
	memcpy(hdr + 10, oem, 6);
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	ASSERT_EQ(fwrite(hdr, 1, len, f), len);
	fclose(f);
}

int main(int argc, char **argv)
{
	char oem[8], cmd[512];
	if (argc > 2 && !strcmp(argv[2], "live")) {
		bool fc = vp_probe__acpi_oem_at("/sys/firmware/acpi/tables", oem, sizeof(oem)) == 0 && !strcmp(oem, "FIRECK");
		bool no_pmu = access("/sys/bus/event_source/devices/cpu", F_OK) != 0 &&
			      access("/sys/bus/event_source/devices/cpu_core", F_OK) != 0;
		char *klog = run_sh_read("dmesg 2>/dev/null", NULL);
		/* Every form kernels log (test-hv-identity quotes them) through the one parser. */
		struct vp_probe_klog kl;
		vp_probe__parse_klog(klog, &kl);
		bool pvm_guest = kl.pvm_guest, pvm_absent = kl.pvm_absent, pvm_host = kl.pvm_host;
		free(klog);
		if (!fc && !no_pmu && !pvm_guest && !pvm_absent && !pvm_host)
			SKIP("neither Firecracker, a kernel without PMU, nor a kernel log that speaks of PVM here");
		snprintf(cmd, sizeof(cmd), "%s probe 2>&1", argv[1]);
		char *out = run_sh_read(cmd, NULL);
		if (pvm_guest) {
			ASSERT_CONTAINS(out, "  hypervisor                 PVM\n");
			ASSERT_CONTAINS(out, "this kernel runs as a PVM guest");
			/* User-mode CPUID is not intercepted on a PVM guest: any other name than
			 * KVM's is the outer host's, and said so. */
			if (!strstr(out, "CPUID signature            KVMKVMKVM"))
				ASSERT_CONTAINS(out, "an outer host: the kernel runs on PVM");
		} else {
			ASSERT_NULL(strstr(out, "  hypervisor                 PVM\n"));
		}
		if (pvm_absent && !pvm_guest)
			ASSERT_CONTAINS(out, "not a PVM guest (pvm-pv: not detected)");
		if (pvm_host)
			ASSERT_CONTAINS(out, "this VM runs PVM guests itself (kvm-pvm loaded)");
		else
			ASSERT_NULL(strstr(out, "runs PVM guests itself"));
		if (fc) {
			ASSERT_CONTAINS(out, "Firecracker");
			ASSERT_TRUE(strstr(out, "KVM: -cpu host,pmu=on; libvirt") == NULL);
		}
		if (no_pmu)
			ASSERT_TRUE(strstr(out, "4 legacy counters") == NULL);
		printf("test-probe-vmm live: ok (firecracker %d, no pmu %d, pvm guest %d, pvm not detected %d, pvm host %d)\n",
		       fc, no_pmu, pvm_guest, pvm_absent, pvm_host);
		free(out);
		return 0;
	}
	char dir[] = "probe-acpi-XXXXXX";   /* fresh each run */
	ASSERT_NOT_NULL(mkdtemp(dir));
	ASSERT_EQ(vp_probe__acpi_oem_at(dir, oem, sizeof(oem)), -ENOENT);
	table(dir, "FACP", "FIRECK", 36);
	ASSERT_OK(vp_probe__acpi_oem_at(dir, oem, sizeof(oem)));
	ASSERT_STREQ(oem, "FIRECK");
	table(dir, "FACP", "BOCHS ", 36);   /* QEMU's: blank padded */
	ASSERT_OK(vp_probe__acpi_oem_at(dir, oem, sizeof(oem)));
	ASSERT_STREQ(oem, "BOCHS");
	table(dir, "FACP", "FIRECK", 12);   /* cut short: skipped, the next table decides */
	table(dir, "DSDT", "FIRECK", 36);
	ASSERT_OK(vp_probe__acpi_oem_at(dir, oem, sizeof(oem)));
	ASSERT_STREQ(oem, "FIRECK");
	ASSERT_EQ(vp_probe__acpi_oem_at(dir, oem, 4), -EINVAL);
	snprintf(cmd, sizeof(cmd), "rm -r %s", dir);
	ASSERT_OK(run_sh(cmd, 50));

	/* The kernel's view (issue 23): a PVM guest, whose user-mode CPUID names the outer
	 * host, is told by its log; a VM that only hosts PVM guests is not one. */
	struct vp_probe_klog k;
	ASSERT_OK(vp_probe__parse_klog("[    0.000000] Hypervisor detected: KVM\n"
				       "[    0.120917] Booting paravirtualized kernel on PVM\n", &k));
	ASSERT_STREQ(k.kernel_hv, "KVM");
	ASSERT_TRUE(k.pvm_guest);
	ASSERT_FALSE(k.pvm_host);
	ASSERT_OK(vp_probe__parse_klog("[    0.0] Hypervisor detected: KVM\n[    0.1] Booting paravirtualized kernel on KVM\n"
				       "[    0.3] pvm-pv: not detected, 0/49 sites patched\n"
				       "[    0.4] kvm-pvm: loaded (native=1 pcid=1)\n", &k));
	ASSERT_FALSE(k.pvm_guest);
	ASSERT_TRUE(k.pvm_absent);
	ASSERT_TRUE(k.pvm_host);
	ASSERT_OK(vp_probe__parse_klog("[    0.3] pvm-pv: detected, 49/49 sites patched\n", &k));
	ASSERT_TRUE(k.pvm_guest);
	ASSERT_STREQ(k.kernel_hv, "");
	ASSERT_EQ(vp_probe__parse_klog(NULL, &k), -EINVAL);
	printf("test-probe-vmm: ok\n");
	return 0;
}
