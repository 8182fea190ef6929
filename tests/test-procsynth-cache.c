/* The rotation's scan of /proc (vp_procsynth_cache): a process the side band shows
 * unchanged is replayed from the last scan, one whose mapping, name, fork or exit went
 * by is read again, and so is every process after lost records. Checked on a child that
 * maps a new executable file between scans: replayed without a record for it (the
 * contract), read again with one. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "common/session_format.h"
#include "recorder/procsynth.h"
#include "test.h"

static pid_t child;
static int child_maps, child_maps_true, comms;

static int count_emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	(void)ctx;
	(void)time;
	if (type == VP_REC_MMAP && ((const struct vp_mmap *)body)->pid == (uint32_t)child) {
		const struct vp_mmap *m = body;
		child_maps++;
		if (len > sizeof(*m) && strstr(m->filename, "/true"))
			child_maps_true++;
	}
	if (type == VP_REC_COMM && ((const struct vp_comm *)body)->pid == (uint32_t)child)
		comms++;
	return 0;
}

static void scan(struct vp_procsynth_cache *c, int *read)
{
	struct vp_procsynth *ps = vp_procsynth__new();
	struct vp_sink s = { .emit = count_emit };
	child_maps = child_maps_true = comms = 0;
	ASSERT_GT(vp_procsynth_cache__all(c, ps, 1, &s, read), 0);
	vp_procsynth__free(ps);
}

int main(void)
{
	int go[2], done[2];
	ASSERT_EQ(pipe(go), 0);
	ASSERT_EQ(pipe(done), 0);
	child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		char b;
		if (read(go[0], &b, 1) != 1)
			_exit(1);
		int fd = open("/bin/true", O_RDONLY);
		if (fd < 0 || mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
			_exit(1);
		if (write(done[1], "", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	struct vp_procsynth_cache *c = vp_procsynth_cache__new();
	ASSERT_NOT_NULL(c);
	int read1 = 0, read2 = 0, read3 = 0;
	scan(c, &read1);
	int maps1 = child_maps;
	ASSERT_GT(maps1, 0);
	ASSERT_GT(comms, 0);
	ASSERT_EQ(child_maps_true, 0);

	/* The child maps /bin/true, which the side band would say: not told yet. */
	char b;
	ASSERT_EQ(write(go[1], "", 1), 1);
	ASSERT_EQ(read(done[0], &b, 1), 1);
	scan(c, &read2);
	ASSERT_EQ(child_maps, maps1);      /* replayed: the same records */
	ASSERT_EQ(child_maps_true, 0);
	ASSERT_GT(comms, 0);
	ASSERT_LT(read2, read1);           /* only processes new since the first scan were read */

	/* A synthesized mapping is no news; a live one is. */
	uint8_t buf[sizeof(struct vp_mmap) + 16] = { 0 };
	struct vp_mmap *m = (struct vp_mmap *)buf;
	m->pid = m->tid = (uint32_t)child;
	m->synthesized = 1;
	strcpy(m->filename, "/bin/true");
	vp_procsynth_cache__observe(c, VP_REC_MMAP, buf, sizeof(buf));
	scan(c, &read3);
	ASSERT_EQ(child_maps_true, 0);
	m->synthesized = 0;
	vp_procsynth_cache__observe(c, VP_REC_MMAP, buf, sizeof(buf));
	scan(c, NULL);
	ASSERT_GT(child_maps_true, 0);     /* read again: the new mapping is there */

	/* After lost records, every process is read again. */
	int read4 = 0, read5 = 0;
	scan(c, &read4);
	vp_procsynth_cache__invalidate(c);
	scan(c, &read5);
	ASSERT_GT(read5, read4);
	ASSERT_GT(child_maps_true, 0);

	vp_procsynth_cache__free(c);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	printf("procsynth cache: unchanged processes replayed, changed ones read again; ok\n");
	return 0;
}
