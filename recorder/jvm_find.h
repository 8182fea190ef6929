/* A running JVM named by its main class or jar, as async-profiler's asprof and jps take
 * them (record -p NAME, attach NAME). */
#ifndef VIPROF_JVM_FIND_H
#define VIPROF_JVM_FIND_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What a java launcher's argv runs, as 'jps -l' shows it: the main class, the jar of
 * -jar, or the module/class of -m, into out. -EINVAL when argv[0] is no java launcher,
 * -ENOENT when it names none (java -version). */
int vp_jvm__main_of(const char *const *argv, int argc, char *out, size_t outlen);

/* Whether name names main: the same, the class's simple name (Main for
 * com.example.Main, also after a module's "app/"), or a jar's file name with or without
 * ".jar" (app or app.jar for /srv/app.jar). */
bool vp_jvm__main_matches(const char *main, const char *name);

/* The one running JVM (other than this process) that name names, from each process's
 * /proc/PID/cmdline, into *pid. 0; -ESRCH when none does, -EEXIST when several do, with
 * one line in err naming the candidates (the JVMs seen, or those that match). */
int vp_jvm__find(const char *name, pid_t *pid, char *err, size_t errlen);

#endif
