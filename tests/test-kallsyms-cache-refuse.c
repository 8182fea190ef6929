/* The per-boot kernel symbol cache is read only when root alone could have written it
 * and only for the boot, kernel and modules it was written for: a cache from another
 * boot or build, or one another user could write (file or directory), is refused. */
#include "recorder/kallsyms.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OTHER_UID 65534   /* nobody */

static const char fixture[] =
	"ffffffff81000000 T _stext\n"
	"ffffffff81001000 t do_one\n"
	"ffffffff81002000 T do_two\n"
	"ffffffff81003000 T _etext\n"
	"ffffffffc0001000 t mod_a\t[kvm]\n"
	"ffffffffc0002000 t mod_b\t[kvm]\n"
	"ffffffffc0003000 t bpf_prog_1234_on_sample\t[bpf]\n"
	"ffffffffc0004000 t mod_c\t[virtio]\n";

static int load_expect(int dirfd, const struct vp_kallsyms_key *key, int want_errno)
{
	struct vp_kallsyms *k = vp_kallsyms__cache_load(dirfd, key);
	int got = k ? 0 : errno;
	if (k) {
		ASSERT_TRUE(vp_kallsyms__partial(k));
		ASSERT_EQ(vp_kallsyms__count(k), 7);   /* the [bpf] program is not kept */
	}
	vp_kallsyms__free(k);
	if (got != want_errno)
		FAIL("cache load: errno %d (%s), expected %d (%s)", got, strerror(got), want_errno, strerror(want_errno));
	return 0;
}

int main(void)
{
	REQUIRE_ROOT();
	char dir[] = "/tmp/startup-kcache.XXXXXX", path[256], cdir[300], file[320];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kallsyms", dir);
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fputs(fixture, f);
	fclose(f);
	bool zero = true;
	struct vp_kallsyms *full = vp_kallsyms__load(path, &zero);
	ASSERT_NOT_NULL(full);
	ASSERT_FALSE(zero);
	ASSERT_EQ(vp_kallsyms__count(full), 8);

	snprintf(cdir, sizeof(cdir), "%s/cache", dir);
	snprintf(file, sizeof(file), "%s/kallsyms.v1", cdir);
	setenv("VIPROF_KSYM_CACHE", cdir, 1);
	int dfd = vp_kallsyms__cache_open();   /* makes it, 0700 */
	ASSERT_GE(dfd, 0);
	struct vp_kallsyms_key key;
	ASSERT_OK(vp_kallsyms__key(&key));
	ASSERT_TRUE(key.boot_id[0] != '\0');
	ASSERT_OK(vp_kallsyms__cache_store(dfd, full, &key));
	load_expect(dfd, &key, 0);
	struct stat st;
	ASSERT_OK(stat(file, &st));
	ASSERT_EQ(st.st_mode & 0777, 0600);

	/* Another boot, another kernel build, another set of modules. */
	struct vp_kallsyms_key other = key;
	other.boot_id[0] = other.boot_id[0] == 'a' ? 'b' : 'a';
	load_expect(dfd, &other, ESTALE);
	other = key;
	snprintf(other.build, sizeof(other.build), "6.1.0-other #1 SMP");
	load_expect(dfd, &other, ESTALE);
	other = key;
	other.modules ^= 1;
	load_expect(dfd, &other, ESTALE);

	/* A file another user owns, or could write. */
	ASSERT_OK(chown(file, OTHER_UID, OTHER_UID));
	load_expect(dfd, &key, EPERM);
	ASSERT_OK(chown(file, 0, 0));
	load_expect(dfd, &key, 0);
	ASSERT_OK(chmod(file, 0620));
	load_expect(dfd, &key, EPERM);
	ASSERT_OK(chmod(file, 0602));
	load_expect(dfd, &key, EPERM);
	ASSERT_OK(chmod(file, 0600));

	/* A second name elsewhere (a hard link) could be written through, and a symlink is
	 * never followed. */
	char link2[320];
	snprintf(link2, sizeof(link2), "%s/elsewhere", dir);
	ASSERT_OK(link(file, link2));
	load_expect(dfd, &key, EPERM);
	ASSERT_OK(unlink(link2));
	char real[340];
	snprintf(real, sizeof(real), "%s/real.v1", cdir);
	ASSERT_OK(rename(file, real));
	ASSERT_OK(symlink(real, file));
	load_expect(dfd, &key, EPERM);
	ASSERT_OK(unlink(file));
	ASSERT_OK(rename(real, file));
	load_expect(dfd, &key, 0);

	/* Damaged: cut short. */
	ASSERT_OK(truncate(file, st.st_size - 3));
	load_expect(dfd, &key, EBADMSG);
	ASSERT_OK(vp_kallsyms__cache_store(dfd, full, &key));
	load_expect(dfd, &key, 0);
	close(dfd);

	/* A directory another user owns, or anyone may write. */
	ASSERT_OK(chown(cdir, OTHER_UID, OTHER_UID));
	ASSERT_EQ(vp_kallsyms__cache_open(), -EPERM);
	ASSERT_OK(chown(cdir, 0, 0));
	ASSERT_OK(chmod(cdir, 0733));
	ASSERT_EQ(vp_kallsyms__cache_open(), -EPERM);
	ASSERT_OK(chmod(cdir, 0700));
	/* ... or one above it. */
	ASSERT_OK(chown(dir, OTHER_UID, OTHER_UID));
	ASSERT_EQ(vp_kallsyms__cache_open(), -EPERM);
	ASSERT_OK(chown(dir, 0, 0));
	dfd = vp_kallsyms__cache_open();
	ASSERT_GE(dfd, 0);
	load_expect(dfd, &key, 0);
	close(dfd);

	/* Turned off. */
	setenv("VIPROF_KSYM_CACHE", "off", 1);
	ASSERT_EQ(vp_kallsyms__cache_open(), -ENOENT);

	vp_kallsyms__free(full);
	unlink(file);
	rmdir(cdir);
	unlink(path);
	rmdir(dir);
	printf("ok\n");
	return 0;
}
