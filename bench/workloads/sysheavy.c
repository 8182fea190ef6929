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

__attribute__((noinline)) long syscall_loop(int fd, uint64_t until)
{
	static const char buf[512];
	long calls = 0;
	while (now_ns() < until) {
		for (int i = 0; i < 64; i++) {
			if (write(fd, buf, sizeof(buf)) < 0)
				return -1;
			/* syscall() rather than getpid(): never served from a libc cache. */
			syscall(SYS_getpid);
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
		perror("sysheavy: write");
		return 1;
	}
	printf("sysheavy: %ld system calls\n", calls);
	return 0;
}
