/* This process's threads and their kernel names: see tasks.h. */
#define _GNU_SOURCE
#include "jvm-agent/tasks.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void vp_tasks__each(bool (*fn)(uint32_t tid, const char *name, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	bool stop = false;

	while (d && !stop && (de = readdir(d))) {
		char path[300], name[VP_TASK_NAME_LEN + 2];
		ssize_t k;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		k = read(fd, name, VP_TASK_NAME_LEN + 1);
		close(fd);
		if (k <= 0)
			continue;
		while (k > 0 && (name[k - 1] == '\n' || name[k - 1] == '\0'))
			k--;
		name[k] = '\0';
		stop = fn((uint32_t)strtoul(de->d_name, NULL, 10), name, ctx);
	}
	if (d)
		closedir(d);
}
