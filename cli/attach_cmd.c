/* viprof attach PID [--dir DIR]: load the agent into a running JVM. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "recorder/jvm_attach.h"
#include "recorder/jvm_find.h"

/* The agent's own default: a directory of the JVM's user, never a shared one (a user
 * who made /tmp/viprof-jit could have had a root JVM write its maps into it). */
#define DEFAULT_DIR "/tmp/viprof-jit-<uid>"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: viprof attach PID|NAME [--dir DIR]\n"
		"Loads the viprof JVMTI agent into the running HotSpot JVM PID (as its user), or the one JVM\n"
		"whose main class or jar is NAME (as 'jps -l' shows it: Shop, com.example.Shop, app.jar), which then\n"
		"writes its JIT code maps to DIR/<pid>/codemap.vpm (default " DEFAULT_DIR ", of the JVM's user),\n"
		"replaying the "
		"code compiled before the attach. DIR is a path as the JVM sees it (inside its container); it\n"
		"must be the JVM user's (or root's) and not writable by others. A JVM that has the agent\n"
		"already gets a new map in DIR (the one it was writing is closed) with its live code replayed.\n"
		"examples:\n"
		"  viprof attach 4242\n"
		"  viprof attach com.example.Shop\n"
		"  viprof attach 4242 --dir /tmp/maps && viprof maps /tmp/maps --pid 4242 list\n");
}

int cmd_attach(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *dir = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	char *end;
	const char *target = argv[optind];
	long pid = strtol(target, &end, 10);
	if (*end && end == target && *target != '-') {
		/* A JVM by its main class or jar, as 'record -p' and async-profiler take it. */
		char why[1024];
		pid_t found;
		if (vp_jvm__find(target, &found, why, sizeof(why))) {
			fprintf(stderr, "viprof attach: %s\n", why);
			return 1;
		}
		pid = found;
	} else if (*end || pid <= 0 || pid > INT32_MAX) {
		fprintf(stderr, "viprof attach: '%s' is not a process id or a JVM's main class or jar\n", target);
		return 2;
	}
	const char *agent = viprof_agent_path();
	if (!agent) {
		fprintf(stderr, "viprof attach: libviprof-jvmti.so not found next to viprof; build target viprof-jvmti or set VIPROF_AGENT\n");
		return 1;
	}
	/* The JVM resolves a relative dir against its own cwd; make it ours. */
	char abs[PATH_MAX], cwd[PATH_MAX - 256], proc[32];
	struct stat st;
	snprintf(proc, sizeof(proc), "/proc/%ld", pid);
	if (!dir && stat(proc, &st) == 0)
		snprintf(abs, sizeof(abs), "/tmp/viprof-jit-%u", (unsigned)st.st_uid);
	else if (!dir)
		snprintf(abs, sizeof(abs), "/tmp/viprof-jit-%u", (unsigned)getuid());
	else if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)))
		snprintf(abs, sizeof(abs), "%s/%s", cwd, dir);
	else
		snprintf(abs, sizeof(abs), "%s", dir);
	char options[PATH_MAX + 16], err[1024];
	snprintf(options, sizeof(options), "dir=%s", abs);
	int ret = vp_jvm__attach((pid_t)pid, agent, options, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "viprof attach: %s\n", err);
		return 1;
	}
	printf("viprof agent loaded into JVM %ld; code maps in %s/%ld/\n", pid, abs, pid);
	return 0;
}
