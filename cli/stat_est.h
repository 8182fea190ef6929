/* `viprof stat`'s steal estimate (common/steal_est.h): the bpf sampler on the counted
 * process with one cpu-clock event and no stacks, whose late timer samples are summed
 * per thread. stat counts and does not sample otherwise; this is the one sampler it
 * runs, so that the host's share is estimated where no steal clock measures it (and
 * beside measured steal where one does). Internal to cli/. */
#ifndef VIPROF_CLI_STAT_EST_H
#define VIPROF_CLI_STAT_EST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct stat_est;

/* Starts sampling pid (launch: the held child, before its exec, and what it forks)
 * at hz. NULL with a one-line reason in why. */
struct stat_est *stat_est__start(pid_t pid, bool launch, unsigned hz, char *why, size_t whylen);
/* Drains the sampler. 0 or -errno. */
int stat_est__poll(struct stat_est *e);
/* Stops and drains. 0 or -errno. */
int stat_est__stop(struct stat_est *e);
/* The estimate in ns for thread tid, or for every thread when tid <= 0. */
double stat_est__ns(const struct stat_est *e, pid_t tid);
/* Late samples seen (those that became an estimate), for the rows' notes. */
unsigned long stat_est__late(const struct stat_est *e);
void stat_est__free(struct stat_est *e);   /* accepts NULL */

#endif
