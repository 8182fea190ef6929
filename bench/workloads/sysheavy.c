/* sysheavy: a workload that spends most of its time in the kernel on behalf of one
 * user function, for tests of kernel/user attribution and of KSYM records.
 * syscall_loop() makes write(2) calls to /dev/null and getpid(2) calls for SECONDS
 * (default 3); with -g, kernel stacks should end in syscall_loop's user frames.
 * usage: sysheavy [SECONDS] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The system calls are issued by inline `syscall` instructions in syscall_loop itself:
 * libc's wrappers are leaf functions without frame pointers, so a frame-pointer walk
 * from inside them skips their caller, and the kernel samples' user stacks would
 * jump from the libc wrapper straight to main. */
static inline __attribute__((always_inline)) long raw_syscall3(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
#else
	return syscall(nr, a, b, c);
#endif
}

__attribute__((noinline)) long syscall_loop(int fd, uint64_t until)
{
	static const char buf[512];
	long calls = 0;
	while (now_ns() < until) {
		for (int i = 0; i < 64; i++) {
			if (raw_syscall3(SYS_write, fd, (long)buf, sizeof(buf)) < 0)
				return -1;
			raw_syscall3(SYS_getpid, 0, 0, 0);
			calls += 2;
		}
	}
	return calls;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	if (secs <= 0 || secs > 86400) {
		fprintf(stderr, "usage: sysheavy [SECONDS]  (a positive number, default 3)\n");
		return 2;
	}
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		perror("sysheavy: /dev/null");
		return 1;
	}
	long calls = syscall_loop(fd, now_ns() + (uint64_t)(secs * 1e9));
	close(fd);
	if (calls < 0) {
		fprintf(stderr, "sysheavy: write to /dev/null failed\n");
		return 1;
	}
	printf("sysheavy: %ld system calls\n", calls);
	return 0;
}
