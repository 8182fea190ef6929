/* Where viprof's own files are, for every folder that needs them (the recorder loads
 * the agent into JVMs, the service starts viprof children). Not thread-safe on the
 * first call of each (they fill a static buffer once); call them before starting
 * threads. */
#ifndef VIPROF_COMMON_PATHS_H
#define VIPROF_COMMON_PATHS_H

/* Where the installed JVMTI agent is: $VIPROF_AGENT, else next to the viprof binary
 * (installed layout) or in the build tree. NULL when none is found. */
const char *viprof_agent_path(void);
/* Absolute path of the running executable. */
const char *viprof_self_path(void);

#endif
