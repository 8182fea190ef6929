/* A recording whose kernel symbols come from the per-boot cache names its kernel frames
 * as a full read of /proc/kallsyms does: every kernel address of every sample of a
 * system-call-heavy command is covered by the session's KSYM record of the symbol that
 * a full read taken after the recording gives it (same address, module, name and,
 * where no BPF program or trampoline follows it, size). The recorder says it read the
 * cache (VIPROF_DEBUG_TIMING). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "recorder/kallsyms.h"
#include "test.h"
#include "test-run.h"

#define MAXK 8192
#define MAXIPS 200000

static struct { uint64_t addr, size; char module[56], name[128]; } ks[MAXK];
static long nks;
static uint64_t ips[MAXIPS];
static long nips;

static bool dynamic_module(const char *m)
{
	return !strcmp(m, "bpf") || !strncmp(m, "__builtin__", 11);
}

int main(void)
{
	REQUIRE_ROOT();
	char tmp[] = "/tmp/startup-ksess.XXXXXX", cdir[PATH_MAX], sess[PATH_MAX], out[16384];
	ASSERT_NOT_NULL(mkdtemp(tmp));
	snprintf(cdir, sizeof(cdir), "%s/cache", tmp);
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	setenv("VIPROF_KSYM_CACHE", cdir, 1);
	setenv("VIPROF_DEBUG_TIMING", "1", 1);

	/* The cache as an earlier recording of this boot left it. */
	bool zero = false;
	struct vp_kallsyms *full = vp_kallsyms__load("/proc/kallsyms", &zero);
	if (!full || zero || !vp_kallsyms__count(full))
		SKIP("/proc/kallsyms cannot be read with addresses here");
	int dfd = vp_kallsyms__cache_open();
	ASSERT_GE(dfd, 0);
	struct vp_kallsyms_key key;
	ASSERT_OK(vp_kallsyms__key(&key));
	ASSERT_OK(vp_kallsyms__cache_store(dfd, full, &key));
	vp_kallsyms__free(full);

	int rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-g", "-q", "-F", "999", "-o", sess, "--",
					     SYSHEAVY, "1", NULL }, out, sizeof(out), 100);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
	ASSERT_CONTAINS(out, "kallsyms: read from the per-boot cache");

	char path[PATH_MAX + 32], err[512];
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	const struct vp_record *rec;
	while (cfile_reader__next(r, &rec) == 1) {
		const void *b = vp_record_body(rec);
		if (rec->type == VP_REC_KSYM && nks < MAXK) {
			const struct vp_ksym *k = b;
			ks[nks].addr = k->addr;
			ks[nks].size = k->size;
			snprintf(ks[nks].module, sizeof(ks[nks].module), "%.*s", (int)sizeof(k->module), k->module);
			snprintf(ks[nks].name, sizeof(ks[nks].name), "%s", k->name);
			nks++;
		} else if (rec->type == VP_REC_SAMPLE) {
			const struct vp_sample *s = b;
			for (unsigned i = 0; i < s->nr_kernel && nips < MAXIPS; i++)
				if (s->ips[i] >= 0xffff800000000000ull && s->ips[i] < (uint64_t)-4095)
					ips[nips++] = s->ips[i];
		}
	}
	cfile_reader__close(r);

	struct vp_kallsyms *now = vp_kallsyms__load("/proc/kallsyms", &zero);
	ASSERT_NOT_NULL(now);
	long compared = 0, dynamic = 0;
	for (long i = 0; i < nips; i++) {
		long idx = vp_kallsyms__find(now, ips[i]);
		if (idx < 0)
			continue;
		struct vp_kallsym_info x;
		vp_kallsyms__info(now, idx, &x);
		if (dynamic_module(x.module)) {
			dynamic++;   /* a BPF program's: it may be gone or moved since */
			continue;
		}
		/* Its size is up to the next symbol: a BPF program loaded since may be that. */
		bool size_fixed = true;
		for (long j = idx + 1; j < (long)vp_kallsyms__count(now); j++) {
			struct vp_kallsym_info y;
			vp_kallsyms__info(now, j, &y);
			if (y.addr > x.addr) {
				size_fixed = !dynamic_module(y.module);
				break;
			}
		}
		long m = -1;
		for (long j = 0; j < nks && m < 0; j++)
			if (ips[i] >= ks[j].addr && ips[i] - ks[j].addr < ks[j].size)
				m = j;
		if (m < 0)
			FAIL("kernel address %#llx (%s [%s]) has no KSYM in the session", (unsigned long long)ips[i], x.name,
			     x.module);
		if (ks[m].addr != x.addr || strcmp(ks[m].name, x.name) || strcmp(ks[m].module, x.module) ||
		    (size_fixed && ks[m].size != x.size))
			FAIL("kernel address %#llx: session %s [%s] %#llx+%llu, full read %s [%s] %#llx+%llu",
			     (unsigned long long)ips[i], ks[m].name, ks[m].module, (unsigned long long)ks[m].addr,
			     (unsigned long long)ks[m].size, x.name, x.module, (unsigned long long)x.addr,
			     (unsigned long long)x.size);
		compared++;
	}
	fprintf(stderr, "%ld kernel frames compared (%ld KSYM records, %ld in BPF programs skipped)\n", compared, nks,
		dynamic);
	ASSERT_GT(compared, 100);
	vp_kallsyms__free(now);
	close(dfd);
	run_shf(60, "rm -rf '%s'", tmp);
	return 0;
}
