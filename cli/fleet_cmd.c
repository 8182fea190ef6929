/* 'viprof fleet init URL': the fleet store's schema in ClickHouse (fleet/fleet.h,
 * docs/fleet.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "fleet/fleet.h"
#include "postproc/session.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: viprof fleet init clickhouse://HOST[:PORT]/DB[?prefix=P&user=FILE] [--cluster NAME|none]\n"
		"       viprof fleet push clickhouse://HOST[:PORT]/DB DIR... [--host H] [--service S]\n"
		"\n"
		"Creates the fleet store's database and tables in ClickHouse when absent: P stacks and\n"
		"P samples (docs/fleet.md). With a cluster (default 'viprof', from the servers'\n"
		"remote_servers) the data lives in P*_local tables on each shard, under Distributed\n"
		"tables of those names: run init on every shard's server. --cluster none: one server.\n"
		"push stores recorded session directories (each one interval, named by its directory,\n"
		"host H, default this machine's name, service S, default viprof), as serve --push does.\n"
		"\n"
		"  viprof fleet init clickhouse://ch1:8123/viprof --cluster prod\n"
		"  viprof serve --continuous /var/lib/viprof --push clickhouse=http://ch1:8123,database=viprof\n"
		"  viprof report clickhouse://ch1:8123/viprof --where 'service=shop,host=vm-*'\n");
}

/* One session directory into the store: loaded with its sample times, encoded, two INSERTs. */
static int push_dir(const struct vp_fleet_url *u, const char *dir, const char *host, const char *service,
		    uint64_t *nsamples, char *err, size_t errlen)
{
	struct vp_profile *p = vp_profile__new();
	struct vp_session_opts so = { .no_locations = true, .times = true };
	char *st = NULL, *sa = NULL, sql[256], name[256];
	size_t stl = 0, sal = 0;
	int e = p ? vp_session__load(dir, p, &so, err, errlen) : -ENOMEM;
	if (e)
		goto cleanup;
	const char *rt = vp_profile__meta(p, "start_realtime_ns");
	snprintf(name, sizeof(name), "%s", dir);
	struct vp_fleet_meta m = { .host = host, .service = service, .interval = basename(name),
				   .from_s = rt ? strtoull(rt, NULL, 10) / 1000000000ull : (uint64_t)time(NULL) };
	if ((e = vp_fleet__encode(p, &m, &st, &stl, &sa, &sal)))
		goto cleanup;
	for (size_t i = 0; i < p->nstacks; i++)
		*nsamples += p->stacks[i].samples[0];
	vp_fleet__insert_sql(u->db, u->prefix, "stacks", sql, sizeof(sql));
	if (stl && (e = vp_fleet__query(u, sql, st, stl, NULL, err, errlen)))
		goto cleanup;
	vp_fleet__insert_sql(u->db, u->prefix, "samples", sql, sizeof(sql));
	if (sal)
		e = vp_fleet__query(u, sql, sa, sal, NULL, err, errlen);
cleanup:
	free(st);
	free(sa);
	vp_profile__free(p);
	return e;
}

int cmd_fleet(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "host", required_argument, NULL, 'H' },
		{ "service", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *cluster = "viprof", *service = "viprof";
	char host[256] = "";
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'c') {
			cluster = optarg;
		} else if (c == 'H') {
			snprintf(host, sizeof(host), "%s", optarg);
		} else if (c == 'S') {
			service = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	bool push = argc - optind >= 3 && !strcmp(argv[optind], "push");
	if (!push && (argc - optind != 2 || strcmp(argv[optind], "init"))) {
		usage(stderr);
		return 2;
	}
	char err[1024] = "";
	struct vp_fleet_url u;
	if (vp_fleet__parse_url(argv[optind + 1], &u, err, sizeof(err))) {
		fprintf(stderr, "viprof fleet: %s\n", err);
		return 2;
	}
	if (push) {
		if (!host[0] && gethostname(host, sizeof(host) - 1) != 0)
			snprintf(host, sizeof(host), "unknown");
		uint64_t n = 0;
		for (int i = optind + 2; i < argc; i++) {
			if (push_dir(&u, argv[i], host, service, &n, err, sizeof(err))) {
				fprintf(stderr, "viprof fleet push: %s: %s\n", argv[i], err);
				return 1;
			}
		}
		printf("viprof fleet: %llu samples (first event) of %d session(s) stored as host %s, service %s\n",
		       (unsigned long long)n, argc - optind - 2, host, service);
		return 0;
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
