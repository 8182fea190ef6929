/* vDSO frames named on another kernel (issue 26): the recorder saves the kernel's vDSO
 * image in the session (VP_REC_VDSO), and the report names [vdso] frames from it. A
 * recording of a program that lives in clock_gettime is reported as is (its leaves are
 * __vdso_clock_gettime, not [vdso]+0x...), then copied with its "kernel" metadata set to
 * another release and the saved image's symbol names changed: the copy's frames carry
 * the changed names, so they came from the session and not from this machine's vDSO. */
#include <limits.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/session.h"
#include "test-record-util.h"

/* Samples whose leaf is a [vdso] frame, and how many of them have a name containing
 * want (NULL: any symbol name, not "[vdso]+0x..."). */
static void vdso_leaves(const char *dir, const char *want, uint64_t *all, uint64_t *named)
{
	struct vp_profile *p = vp_profile__new();
	char err[512] = "";
	ASSERT_NOT_NULL(p);
	struct vp_session_opts o = { .no_locations = true };
	if (vp_session__load(dir, p, &o, err, sizeof(err)))
		FAIL("loading %s: %s", dir, err);
	*all = *named = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->nframes || strcmp(p->frames[s->frames[s->nframes - 1]].image, "[vdso]"))
			continue;
		const char *name = p->frames[s->frames[s->nframes - 1]].name;
		for (int e = 0; e < p->nevents; e++) {
			*all += s->samples[e];
			if (want ? strstr(name, want) != NULL : strncmp(name, "[vdso]+", 7) != 0)
				*named += s->samples[e];
		}
	}
	vp_profile__free(p);
}

/* Copies src's stream to dst with META kernel set to another release and every
 * "clock_gettime" in the VDSO record's image renamed "clock_gettimX" (same length). */
static void copy_as_other_kernel(const char *src, const char *dst, int *vdso_records)
{
	char in[PATH_MAX + 32], out[PATH_MAX + 32], err[512];
	snprintf(in, sizeof(in), "%s/%s", src, VP_SESSION_STREAM);
	snprintf(out, sizeof(out), "%s/%s", dst, VP_SESSION_STREAM);
	ASSERT_OK(mkdir(dst, 0700));
	struct cfile_reader *r = cfile_reader__open(in, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	struct cfile_writer *w = cfile_writer__create(out, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	const struct vp_record *rec;
	int k;
	*vdso_records = 0;
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		size_t len = vp_record_body_len(rec);
		char *body = malloc(len + 64);
		ASSERT_NOT_NULL(body);
		memcpy(body, vp_record_body(rec), len);
		if (rec->type == VP_REC_VDSO) {
			++*vdso_records;
			for (size_t i = 0; i + 13 <= len; i++)
				if (!memcmp(body + i, "clock_gettime", 13))
					body[i + 12] = 'X';
		} else if (rec->type == VP_REC_META) {
			/* "key\0value\0" pairs: the kernel's value replaced. */
			char *nb = malloc(len + 64);
			size_t nl = 0;
			ASSERT_NOT_NULL(nb);
			for (size_t i = 0; i < len && body[i];) {
				const char *key = body + i, *val = key + strnlen(key, len - i) + 1;
				if (val >= body + len)
					break;
				size_t kl = strlen(key) + 1, vl = strnlen(val, (size_t)(body + len - val));
				const char *v = !strcmp(key, "kernel") ? "0.0.0-another-kernel" : val;
				size_t vlen = !strcmp(key, "kernel") ? strlen(v) : vl;
				memcpy(nb + nl, key, kl);
				memcpy(nb + nl + kl, v, vlen);
				nb[nl + kl + vlen] = '\0';
				nl += kl + vlen + 1;
				i = (size_t)(val - body) + vl + 1;
			}
			free(body);
			body = nb;
			len = nl;
		}
		ASSERT_OK(cfile_writer__append(w, rec->type, rec->time, body, len));
		free(body);
	}
	ASSERT_EQ(k, 0);
	ASSERT_OK(cfile_writer__close(w));
	cfile_reader__close(r);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		FAIL("usage: test-vdso-session VIPROF VDSO_LOOP");
	if (geteuid() != 0)
		SKIP("needs root to record");
	char dir[] = "/tmp/vp-test-vdso-XXXXXX", sess[PATH_MAX], other[PATH_MAX], log[16384];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	int rc = tr_run(dir, (char *const[]){ argv[1], "record", "-q", "-F", "999", "-o", sess, "--", argv[2], "1", NULL },
			log, sizeof(log));
	if (rc)
		FAIL("record exited %d: %s", rc, log);

	uint64_t all, named;
	vdso_leaves(sess, NULL, &all, &named);
	/* About 1000 samples, most in the vDSO; a loaded machine gives fewer, never none. */
	if (all < 20)
		FAIL("only %llu samples in the vDSO of a program that lives there", (unsigned long long)all);
	ASSERT_UEQ(named, all);
	vdso_leaves(sess, "clock_gettime", &all, &named);
	ASSERT_GT(named, all / 2);

	int nv;
	copy_as_other_kernel(sess, other, &nv);
	ASSERT_EQ(nv, 1);   /* the recorder saved the image, once */
	uint64_t all2, named2;
	vdso_leaves(other, "clock_gettimX", &all2, &named2);
	ASSERT_UEQ(all2, all);
	ASSERT_UEQ(named2, named);

	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) {
		/* left behind in /tmp */
	}
	printf("PASS: %llu vDSO samples named from the session's image\n", (unsigned long long)all);
	return 0;
}
