/* Where viprof's own files are: see paths.h. */
#include "common/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char self_path[PATH_MAX];
static char agent_path[PATH_MAX];

const char *viprof_self_path(void)
{
	if (!self_path[0]) {
		ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
		if (n > 0)
			self_path[n] = '\0';
	}
	return self_path;
}

const char *viprof_agent_path(void)
{
	if (agent_path[0])
		return agent_path;
	const char *env = getenv("VIPROF_AGENT");
	if (env && *env) {
		snprintf(agent_path, sizeof(agent_path), "%s", env);
		return agent_path;
	}
	/* Installed layout: bin/viprof and lib/viprof/libviprof-jvmti.so; build tree:
	 * cli/viprof and jvm-agent/libviprof-jvmti.so. */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", viprof_self_path());
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	const char *cands[] = { "%s/../jvm-agent/libviprof-jvmti.so", "%s/../lib/viprof/libviprof-jvmti.so",
				"%s/libviprof-jvmti.so" };
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		char p[PATH_MAX + 64];
		snprintf(p, sizeof(p), cands[i], dir);
		if (access(p, R_OK) == 0 && realpath(p, agent_path))
			return agent_path;
	}
	agent_path[0] = '\0';
	return NULL;
}
