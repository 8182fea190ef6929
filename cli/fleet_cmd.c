/* 'viprof fleet init URL': the fleet store's schema in ClickHouse (fleet/fleet.h,
 * docs/fleet.md). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "fleet/fleet.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: viprof fleet init clickhouse://HOST[:PORT]/DB[?prefix=P&user=FILE] [--cluster NAME|none]\n"
		"\n"
		"Creates the fleet store's database and tables in ClickHouse when absent: P stacks and\n"
		"P samples (docs/fleet.md). With a cluster (default 'viprof', from the servers'\n"
		"remote_servers) the data lives in P*_local tables on each shard, under Distributed\n"
		"tables of those names: run init on every shard's server. --cluster none: one server.\n"
		"\n"
		"  viprof fleet init clickhouse://ch1:8123/viprof --cluster prod\n"
		"  viprof serve --continuous /var/lib/viprof --push clickhouse=http://ch1:8123,database=viprof\n"
		"  viprof report clickhouse://ch1:8123/viprof --where 'service=shop,host=vm-*'\n");
}

int cmd_fleet(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *cluster = "viprof";
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'c') {
			cluster = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2 || strcmp(argv[optind], "init")) {
		usage(stderr);
		return 2;
	}
	char err[1024] = "";
	struct vp_fleet_url u;
	if (vp_fleet__parse_url(argv[optind + 1], &u, err, sizeof(err))) {
		fprintf(stderr, "viprof fleet: %s\n", err);
		return 2;
	}
	if (vp_fleet__init(&u, strcmp(cluster, "none") ? cluster : NULL, err, sizeof(err))) {
		fprintf(stderr, "viprof fleet init: %s\n", err);
		return 1;
	}
	printf("viprof fleet: %s.%sstacks and %s.%ssamples are ready on %s:%s%s%s\n", u.db, u.prefix, u.db, u.prefix,
	       u.host, u.port, strcmp(cluster, "none") ? ", Distributed over cluster " : "",
	       strcmp(cluster, "none") ? cluster : "");
	return 0;
}
