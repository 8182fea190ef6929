/* The sampling interrupt alone: what any profiler that samples a command at F Hz by the
 * kernel's cpu-clock (perf_events' hrtimer: perf, async-profiler's event=cpu, viprof where
 * the VM has no PMU) pays before it does anything with a sample. It opens one inherited
 * cpu-clock event at F Hz on the command it launches, with no ring buffer and no program
 * attached, so that each overflow is the timer interrupt, perf's overflow path and nothing
 * else: no stack, no record, no reader. bench/suite.py runs it beside viprof and
 * async-profiler ("the floor"): a profiler's CPU over the command alone cannot go below it.
 *
 * Usage: timer-floor FREQ -- COMMAND [ARG...]   (root or CAP_PERFMON)
 * Exits with the command's status; prints the event's count (CPU ns sampled) to stderr with -v. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int verbose = argc > 1 && !strcmp(argv[1], "-v");
	char **a = argv + verbose;
	int go[2], fd, status;
	unsigned long freq;
	pid_t pid;
	char c;

	if (argc - verbose < 4 || strcmp(a[2], "--")) {
		fprintf(stderr, "usage: timer-floor [-v] FREQ -- COMMAND [ARG...]\n");
		return 2;
	}
	freq = strtoul(a[1], NULL, 10);
	if (!freq || pipe(go))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		/* Held until the event is open, so that it counts from the exec on. */
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		close(go[0]);
		execvp(a[3], a + 3);
		fprintf(stderr, "timer-floor: cannot run %s: %s\n", a[3], strerror(errno));
		_exit(127);
	}
	close(go[0]);
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = freq,
		.freq = 1,
		.sample_type = PERF_SAMPLE_IP,
		.inherit = 1,
		.enable_on_exec = 1,
		.disabled = 1,
	};
	fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "timer-floor: perf_event_open(cpu-clock, %lu Hz): %s; run as root or grant CAP_PERFMON\n",
			freq, strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 2;
	}
	if (write(go[1], "x", 1) != 1)
		return 2;
	close(go[1]);
	if (waitpid(pid, &status, 0) < 0)
		return 2;
	if (verbose) {
		uint64_t ns = 0;

		if (read(fd, &ns, sizeof(ns)) == (ssize_t)sizeof(ns))
			fprintf(stderr, "timer-floor: %.3f s of CPU sampled at %lu Hz: about %.0f interrupts\n",
				ns / 1e9, freq, ns / 1e9 * (double)freq);
	}
	close(fd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
