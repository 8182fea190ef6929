/* viprof: one command, perf-like subcommands. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/util.h"

#ifndef VIPROF_VERSION
#define VIPROF_VERSION "0.0.0"
#endif
#ifndef VIPROF_COMMIT
#define VIPROF_COMMIT "unknown"
#endif

static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "probe",  cmd_probe,  "what this machine/VM can sample, and why" },
	{ "record", cmd_record, "record a profile into a session directory" },
	{ "report", cmd_report, "read sessions and print or write reports" },
	{ "maps",   cmd_maps,   "inspect the JIT code maps of a session (epochs, lookup, diff)" },
	{ "attach", cmd_attach, "load the viprof agent into a running JVM" },
	{ "stat",   cmd_stat,   "count events per thread (virtualized counters)" },
	{ "serve",  cmd_serve,  "the service: pprof over HTTP, continuous whole-VM recording" },
	{ "fleet",  cmd_fleet,  "the fleet store in ClickHouse: fleet init, fleet push (report clickhouse:// reads it)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: viprof <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'viprof <command> --help' shows a command's options.\n");
}

int main(int argc, char **argv)
{
	vp_timing("main");
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "help") && argc > 2) {
		/* 'viprof help record' is 'viprof record --help', as git and perf do it. */
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			if (!strcmp(argv[2], commands[i].name))
				return commands[i].fn(2, (char *[]){ argv[2], "--help", NULL });
		fprintf(stderr, "viprof: unknown command '%s'; run 'viprof --help' for the list\n", argv[2]);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
		printf("viprof %s (commit %s)\n", VIPROF_VERSION, VIPROF_COMMIT);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "viprof: unknown command '%s'; run 'viprof --help' for the list\n", argv[1]);
	return 2;
}
