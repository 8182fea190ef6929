#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/launch.h"
#include "common/util.h"

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The child: only calls that are safe after fork in a threaded parent, plus the one
 * message on failure. */
static void child(int go, int ex, char *const *cmd, const struct vp_launch_opts *o)
{
	char c;
	ssize_t k;

	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	do
		k = read(go, &c, 1);
	while (k < 0 && errno == EINTR);
	if (k != 1)
		_exit(127);   /* the caller gave up before starting: never run unobserved */
	/* The command runs as the invoking user, not as a set-uid viprof. */
	if (getuid() != geteuid() || getgid() != getegid()) {
		if (setgid(getgid()) != 0 || setuid(getuid()) != 0)
			_exit(127);
	}
	if (o && o->env_name && o->env_value)
		setenv(o->env_name, o->env_value, 1);
	execvp(cmd[0], cmd);
	int e = errno;
	fprintf(stderr, "%s: cannot run '%s': %s; check the command name and PATH\n", o && o->who ? o->who : "viprof",
		cmd[0], strerror(e));
	/* ex is close-on-exec: the caller reads EOF after a successful exec, e otherwise. */
	if (vp_write_all(ex, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

int vp_child__launch(struct vp_held_child *c, char *const *cmd, const struct vp_launch_opts *o)
{
	int go[2] = { -1, -1 }, ex[2] = { -1, -1 };
	int err;

	c->pid = -1;
	c->go_fd = c->exec_fd = -1;
	if (!cmd || !cmd[0])
		return -EINVAL;
	if (pipe2(go, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
		err = -errno;
		goto cleanup;
	}
	pid_t pid = fork();
	if (pid < 0) {
		err = -errno;
		goto cleanup;
	}
	if (pid == 0) {
		close(go[1]);
		close(ex[0]);
		child(go[0], ex[1], cmd, o);
	}
	close_fd(&go[0]);
	close_fd(&ex[1]);
	c->pid = pid;
	c->go_fd = go[1];
	c->exec_fd = ex[0];
	return 0;
cleanup:
	close_fd(&go[0]);
	close_fd(&go[1]);
	close_fd(&ex[0]);
	close_fd(&ex[1]);
	return err;
}

int vp_child__release(struct vp_held_child *c, int *exec_errno)
{
	if (exec_errno)
		*exec_errno = 0;
	if (c->go_fd < 0)
		return -EBADF;
	int err = vp_write_all(c->go_fd, "g", 1);
	close_fd(&c->go_fd);
	if (err || !exec_errno || c->exec_fd < 0)
		return err;
	int e = 0;
	ssize_t k = vp_read_full(c->exec_fd, &e, sizeof(e));
	close_fd(&c->exec_fd);
	if (k == (ssize_t)sizeof(e))
		*exec_errno = e;
	return k < 0 ? (int)k : 0;
}

void vp_child__close(struct vp_held_child *c)
{
	close_fd(&c->go_fd);
	close_fd(&c->exec_fd);
}
