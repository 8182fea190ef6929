/* The fleet store: intervals of many VMs in ClickHouse (docs/fleet.md).
 *
 * Two tables per prefix P (default "viprof_"), each a Distributed table over per-shard
 * local tables (P<name>_local) when a cluster is named, else a plain local table:
 *   P stacks    one row per distinct stack: hash, frame names, images, layers, tiers
 *               (ReplacingMergeTree ORDER BY hash: the same stack sent twice is one)
 *   P samples   one row per (interval, stack, thread, event, second, GC epoch): time,
 *               host, service, pid, tid, thread, container, event and its unit, the
 *               leaf's layer, the off-CPU kind, the epoch, samples and weight
 *               (ReplacingMergeTree ORDER BY (service, host, interval, ...): a retried
 *               interval replaces its own rows; readers use FINAL)
 * Sharded by cityHash64(service, host): one host's one service lives on one shard.
 *
 * Everything here is a library: the CLI (viprof fleet init, viprof report clickhouse://)
 * and the pusher (daemon/push.c) call it. Queries go over ClickHouse's HTTP interface
 * through libcurl. */
#ifndef VIPROF_FLEET_FLEET_H
#define VIPROF_FLEET_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "postproc/profile.h"

#define VP_FLEET_DEFAULT_PREFIX "viprof_"
#define VP_FLEET_DEFAULT_DB "viprof"

/* Where a fleet lives: clickhouse://HOST[:PORT]/DB (HTTP, port 8123), or
 * clickhouses://HOST[:PORT]/DB (HTTPS, port 8443), with ?prefix=P&user=FILE&ca=FILE
 * (user=FILE: one line user:password, not open to group or others). */
struct vp_fleet_url {
	bool https;
	char host[256], port[8];
	char db[64], prefix[32];
	char auth[400];                /* "user:password" or "" */
	char ca[256];
};
int vp_fleet__parse_url(const char *url, struct vp_fleet_url *u, char *err, size_t errlen);
/* Whether s names a fleet store (clickhouse:// or clickhouses://). */
bool vp_fleet__is_url(const char *s);
/* Whether names are safe to put in SQL unquoted: letters, digits, '_' (1..63). */
bool vp_fleet__ident_ok(const char *s);

/* Runs sql (with body after it, for INSERT, or NULL) and returns the answer malloc'd
 * (NUL-terminated) in *out, or NULL. 0, or -errno with ClickHouse's or libcurl's reason
 * in err. */
int vp_fleet__query(const struct vp_fleet_url *u, const char *sql, const char *body, size_t bodylen, char **out,
		    char *err, size_t errlen);

/* Creates the database and the tables if absent. cluster: the cluster's name in the
 * servers' remote_servers, or NULL for one server without Distributed tables. Run it on
 * every shard's server (DDL ON CLUSTER needs ZooKeeper, which a test cannot run). */
int vp_fleet__init(const struct vp_fleet_url *u, const char *cluster, char *err, size_t errlen);

/* One interval's identity, stored with each of its rows. */
struct vp_fleet_meta {
	const char *host, *service;
	const char *interval;          /* its name: a retry sends the same */
	uint64_t from_s;               /* its start, Unix seconds: a sample's time is from + its offset */
};
/* Encodes p (loaded with vp_session_opts.times for per-second rows and GC epochs) as two
 * TabSeparated bodies: the stacks table's rows and the samples table's, malloc'd.
 * 0 or -ENOMEM. */
int vp_fleet__encode(const struct vp_profile *p, const struct vp_fleet_meta *m, char **stacks, size_t *stacks_len,
		     char **samples, size_t *samples_len);
/* The SQL that inserts one table's rows of vp_fleet__encode (table "stacks" or "samples"). */
void vp_fleet__insert_sql(const char *db, const char *prefix, const char *table, char *out, size_t outlen);

/* What a fleet report reads: --where 'key=value,..' (service, host, container, thread,
 * event, interval; '*' matches any run of characters; a key given twice matches either
 * value) and a time range in Unix seconds (to 0: no end). */
struct vp_fleet_filter {
	const char *where;
	double t_from, t_to;
	const char *container;         /* report --container: an id prefix, or NULL */
	const char *thread;            /* report --comm, or NULL */
	bool times;                    /* also when (per second, from the first row's), for the
					* HTML report's time strip: a second aggregation by ts */
};
/* Aggregates in ClickHouse (GROUP BY stack hash, thread and event; sums of samples and
 * weight) and adds the result to p as stacks of pid 0. 0, or -errno with a reason. */
int vp_fleet__load(const struct vp_fleet_url *u, const struct vp_fleet_filter *f, struct vp_profile *p, char *err,
		   size_t errlen);

/* The 64-bit hash that keys a stack: its frames' names, images, layers and tiers. */
uint64_t vp_fleet__stack_hash(const struct vp_profile *p, const struct vp_stack *s);

#endif
