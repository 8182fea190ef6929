/* The JVM watch of a whole-VM recording hears of JVMs through the side band: only a
 * live mapping of a libjvm.so makes a process watched (not a synthesized one, whose
 * process the session's start attached to, nor a look-alike name, nor a record whose
 * name runs past its length). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/session_format.h"
#include "recorder/record_jvm.h"
#include "test.h"

static size_t mk(uint8_t *buf, size_t cap, const char *name, int synthesized, bool terminate)
{
	struct vp_mmap *m = (struct vp_mmap *)buf;
	size_t n = strlen(name);
	memset(buf, 0, cap);
	m->pid = m->tid = 4242;
	m->synthesized = (uint8_t)synthesized;
	memcpy(m->filename, name, n);
	return sizeof(*m) + n + (terminate ? 1 : 0);
}

int main(void)
{
	uint8_t buf[sizeof(struct vp_mmap) + 256];
	size_t len;

	len = mk(buf, sizeof(buf), "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so", 0, true);
	ASSERT_TRUE(record_jvm__is_libjvm_mmap(buf, len));
	len = mk(buf, sizeof(buf), "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so", 1, true);
	ASSERT_FALSE(record_jvm__is_libjvm_mmap(buf, len));
	len = mk(buf, sizeof(buf), "/usr/lib/x86_64-linux-gnu/libc.so.6", 0, true);
	ASSERT_FALSE(record_jvm__is_libjvm_mmap(buf, len));
	len = mk(buf, sizeof(buf), "/opt/app/libjvm.so.bak", 0, true);
	ASSERT_FALSE(record_jvm__is_libjvm_mmap(buf, len));
	len = mk(buf, sizeof(buf), "/opt/app/notlibjvm.so", 0, true);
	ASSERT_FALSE(record_jvm__is_libjvm_mmap(buf, len));
	len = mk(buf, sizeof(buf), "/x/libjvm.so", 0, false);   /* no NUL within the record */
	ASSERT_FALSE(record_jvm__is_libjvm_mmap(buf, len));
	ASSERT_FALSE(record_jvm__is_libjvm_mmap(buf, sizeof(struct vp_mmap)));

	/* Noted once per process; a second mapping of the same process adds nothing. */
	struct record_jvm_watch wt = { 0 };
	len = mk(buf, sizeof(buf), "/x/lib/server/libjvm.so", 0, true);
	record_jvm__watch_mmap(&wt, buf, len, 1);
	record_jvm__watch_mmap(&wt, buf, len, 2);
	ASSERT_EQ(wt.n, 1);
	len = mk(buf, sizeof(buf), "/x/lib/libjava.so", 0, true);
	record_jvm__watch_mmap(&wt, buf, len, 3);
	ASSERT_EQ(wt.n, 1);
	record_jvm__watch_free(&wt);
	printf("jvm watch: libjvm.so mappings only; ok\n");
	return 0;
}
