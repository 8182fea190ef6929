/* A running JVM by its main class or jar (record -p NAME, attach NAME), as jps names it:
 * from each process's command line, which every user may read (jps reads the same
 * sun.rt.javaCommand from hsperfdata, which a JVM started with -XX:-UsePerfData or
 * -XX:+PerfDisableSharedMem does not write). See recorder/jvm_find.h. */
#define _GNU_SOURCE
#include "recorder/jvm_find.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

#define CMDLINE_MAX 65536

/* Launcher options that take the next argument as their value (the java launcher's
 * IsWhiteSpaceOption): skipped with it on the way to the main class. */
static bool takes_value(const char *a)
{
	static const char *const opts[] = {
		"-cp", "-classpath", "--class-path", "-p", "--module-path", "--upgrade-module-path",
		"--add-modules", "--limit-modules", "--add-exports", "--add-opens", "--add-reads",
		"--patch-module", "--enable-native-access", "--describe-module", "--source", "-d", NULL,
	};
	for (int i = 0; opts[i]; i++)
		if (!strcmp(a, opts[i]))
			return true;
	return false;
}

int vp_jvm__main_of(const char *const *argv, int argc, char *out, size_t outlen)
{
	if (outlen)
		out[0] = '\0';
	if (argc < 1 || !argv[0])
		return -EINVAL;
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, "java"))
		return -EINVAL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((!strcmp(a, "-jar") || !strcmp(a, "-m") || !strcmp(a, "--module")) && i + 1 < argc) {
			snprintf(out, outlen, "%s", argv[i + 1]);
			return 0;
		}
		if (!strncmp(a, "--module=", 9)) {
			snprintf(out, outlen, "%s", a + 9);
			return 0;
		}
		if (a[0] != '-') {
			snprintf(out, outlen, "%s", a);   /* the main class (or a source file) */
			return 0;
		}
		if (takes_value(a))
			i++;
	}
	return -ENOENT;   /* java -version, or options only */
}

bool vp_jvm__main_matches(const char *main, const char *name)
{
	if (!*main || !*name)
		return false;
	if (!strcmp(main, name))
		return true;
	/* A module's main: "app/com.example.Main". */
	const char *slash = strrchr(main, '/');
	size_t ml = strlen(main);
	if (ml > 4 && !strcmp(main + ml - 4, ".jar")) {
		/* A jar by its file name, with or without ".jar". */
		const char *file = slash ? slash + 1 : main;
		size_t fl = strlen(file) - 4;
		return !strcmp(file, name) || (strlen(name) == fl && !strncmp(file, name, fl));
	}
	const char *cls = slash ? slash + 1 : main;
	if (!strcmp(cls, name))
		return true;
	/* A class by its simple name: "Main" for "com.example.Main". */
	const char *dot = strrchr(cls, '.');
	return dot && !strcmp(dot + 1, name);
}

/* The process's argv, split in place into buf. Returns argc, or -errno. */
static int read_argv(pid_t pid, char *buf, size_t len, const char **argv, int maxargs)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = vp_read_full(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? (int)n : -ENOENT;   /* a kernel thread, or a zombie */
	buf[n] = '\0';
	int argc = 0;
	for (ssize_t i = 0; i < n && argc < maxargs; i += (ssize_t)strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	return argc;
}

int vp_jvm__find(const char *name, pid_t *pid, char *err, size_t errlen)
{
	DIR *d = opendir("/proc");
	char *buf = malloc(CMDLINE_MAX), seen[768] = "", found[768] = "";
	int nfound = 0, nseen = 0, ret = 0;
	*pid = 0;
	if (!d || !buf) {
		ret = d ? -ENOMEM : -errno;
		vp_set_err(err, errlen, "cannot list the running processes in /proc: %s", strerror(-ret));
		goto cleanup;
	}
	for (struct dirent *de; (de = readdir(d));) {
		long long p = vp_parse_num(de->d_name, 1, 4194304);
		const char *argv[256];
		char main[256];
		if (p <= 0 || p == getpid())
			continue;
		int argc = read_argv((pid_t)p, buf, CMDLINE_MAX, argv, 256);
		if (argc <= 0 || vp_jvm__main_of(argv, argc, main, sizeof(main)))
			continue;
		char one[300];
		snprintf(one, sizeof(one), "%s%lld %s", nseen ? ", " : "", p, main);
		if (strlen(seen) + strlen(one) + 5 < sizeof(seen))
			strcat(seen, one);
		else if (!strstr(seen, ", ..."))
			strcat(seen, ", ...");
		nseen++;
		if (!vp_jvm__main_matches(main, name))
			continue;
		snprintf(one, sizeof(one), "%s%lld %s", nfound ? ", " : "", p, main);
		if (strlen(found) + strlen(one) + 5 < sizeof(found))
			strcat(found, one);
		else if (!strstr(found, ", ..."))
			strcat(found, ", ...");
		if (!nfound++)
			*pid = (pid_t)p;
	}
	if (nfound == 1)
		goto cleanup;
	*pid = 0;
	if (nfound > 1) {
		ret = -EEXIST;
		vp_set_err(err, errlen, "'%s' names %d running JVMs (%s); give the one you mean by its pid", name, nfound,
			   found);
	} else {
		ret = -ESRCH;
		vp_set_err(err, errlen, "no running JVM has the main class or jar '%s' (%s%s); give its pid, or its main "
			   "class as 'jps -l' shows it", name, nseen ? "running JVMs: " : "no JVM is running", seen);
	}
cleanup:
	if (d)
		closedir(d);
	free(buf);
	return ret;
}
