/* The three memory readers of hotspot/: see memory.h. */
#define _GNU_SOURCE
#include "hotspot/memory.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static int self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	(void)ctx;
	if (addr < 4096)
		return -EFAULT;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

static int direct_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < 4096)
		return -EFAULT;
	/* Volatile byte loads for small reads: the heaps change under the reader, and a
	 * memcpy the compiler merges with a later read could see two versions. */
	if (len == 8)
		*(uint64_t *)buf = *(const volatile uint64_t *)(uintptr_t)addr;
	else if (len == 4)
		*(uint32_t *)buf = *(const volatile uint32_t *)(uintptr_t)addr;
	else if (len == 1)
		*(uint8_t *)buf = *(const volatile uint8_t *)(uintptr_t)addr;
	else
		memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

const struct vp_hs_mem vp_hs_mem_self = { self_read, NULL };
const struct vp_hs_mem vp_hs_mem_direct = { direct_read, NULL };

static int pid_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct vp_hs_pid_mem *m = ctx;

	if (!m->use_proc_mem && !m->proc_mem_only) {
		struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
		ssize_t n = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);

		if (n == (ssize_t)len)
			return 0;
		if (n >= 0 || (errno != ENOSYS && errno != EPERM))
			return n < 0 && errno == ESRCH ? -ESRCH : -EFAULT;
		/* Not allowed here (a seccomp filter, a kernel without it): /proc/PID/mem
		 * gives the same memory under the same ptrace check. */
		m->use_proc_mem = true;
	}
	if (m->memfd < 0) {
		char path[48];

		snprintf(path, sizeof(path), "/proc/%d/mem", (int)m->pid);
		m->memfd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (m->memfd < 0)
			return -errno;
	}
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(m->memfd, (char *)buf + done, len - done, (off_t)(addr + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EFAULT;
		done += (size_t)n;
	}
	return 0;
}

void vp_hs_pid_mem__init(struct vp_hs_pid_mem *pm, pid_t pid, bool proc_mem_only)
{
	*pm = (struct vp_hs_pid_mem){ .pid = pid, .proc_mem_only = proc_mem_only, .memfd = -1 };
	pm->mem = (struct vp_hs_mem){ pid_read, pm };
}

void vp_hs_pid_mem__close(struct vp_hs_pid_mem *pm)
{
	if (pm && pm->memfd >= 0) {
		close(pm->memfd);
		pm->memfd = -1;
	}
}

int vp_hs_mem__str(const struct vp_hs_mem *m, uint64_t a, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	if (!a)
		return -EFAULT;
	while (n < len) {
		size_t k = 4096 - (size_t)((a + n) & 4095);
		int rc;

		if (k > len - n)
			k = len - n;
		if (k > 64)
			k = 64;              /* names are short: do not read far past them */
		rc = vp_hs_mem__read(m, a + n, out + n, k);
		if (rc)
			return rc < 0 ? rc : -EFAULT;
		if (memchr(out + n, '\0', k))
			return 0;
		n += k;
	}
	out[len - 1] = '\0';
	return -ENAMETOOLONG;
}
