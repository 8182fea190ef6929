/* The fleet store's client side: URLs, queries over HTTP, the schema (see fleet.h). */
#define _GNU_SOURCE
#include "fleet/fleet.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"

bool vp_fleet__is_url(const char *s)
{
	return s && (!strncmp(s, "clickhouse://", 13) || !strncmp(s, "clickhouses://", 14));
}

bool vp_fleet__ident_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

int vp_fleet__parse_url(const char *url, struct vp_fleet_url *u, char *err, size_t errlen)
{
	memset(u, 0, sizeof(*u));
	char buf[1024];
	const char *rest;
	if (!strncmp(url, "clickhouse://", 13)) {
		rest = url + 13;
	} else if (!strncmp(url, "clickhouses://", 14)) {
		rest = url + 14;
		u->https = true;
	} else {
		vp_set_err(err, errlen, "%s: expected clickhouse://HOST[:PORT]/DB (or clickhouses:// for HTTPS)", url);
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", rest);
	char *q = strchr(buf, '?');
	if (q)
		*q++ = '\0';
	char *slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	snprintf(u->db, sizeof(u->db), "%s", slash && *slash ? slash : VP_FLEET_DEFAULT_DB);
	snprintf(u->prefix, sizeof(u->prefix), "%s", VP_FLEET_DEFAULT_PREFIX);
	if (strchr(buf, '@')) {
		vp_set_err(err, errlen, "%s: no credentials in the URL: add ?user=FILE (a file holding user:password)", url);
		return -EINVAL;
	}
	char *hp = buf, *colon = hp[0] == '[' ? strstr(hp, "]:") : strrchr(hp, ':');
	if (colon && hp[0] == '[')
		colon++;
	if (colon) {
		*colon = '\0';
		snprintf(u->port, sizeof(u->port), "%s", colon + 1);
	} else {
		snprintf(u->port, sizeof(u->port), "%s", u->https ? "8443" : "8123");
	}
	if (hp[0] == '[') {
		hp++;
		hp[strcspn(hp, "]")] = '\0';
	}
	if (!*hp || strlen(hp) >= sizeof(u->host) || vp_parse_num(u->port, 1, 65535) < 0 ||
	    strpbrk(hp, "/?#@ \t\r\n%\\")) {
		vp_set_err(err, errlen, "%s: expected clickhouse://HOST[:PORT]/DB", url);
		return -EINVAL;
	}
	snprintf(u->host, sizeof(u->host), "%s", hp);
	if (!vp_fleet__ident_ok(u->db)) {
		vp_set_err(err, errlen, "%s: database '%s': letters, digits and '_' only", url, u->db);
		return -EINVAL;
	}
	for (char *o = q; o && *o;) {
		char *next = strchr(o, '&');
		if (next)
			*next++ = '\0';
		if (!strncmp(o, "prefix=", 7)) {
			if (!vp_fleet__ident_ok(o + 7) || strlen(o + 7) >= sizeof(u->prefix)) {
				vp_set_err(err, errlen, "%s: prefix '%s': letters, digits and '_' only, at most %zu", url, o + 7,
					   sizeof(u->prefix) - 1);
				return -EINVAL;
			}
			snprintf(u->prefix, sizeof(u->prefix), "%s", o + 7);
		} else if (!strncmp(o, "user=", 5)) {
			int e = vp_safe_read_userpass("user", o + 5, u->auth, sizeof(u->auth), err, errlen);
			if (e)
				return e;
		} else if (!strncmp(o, "ca=", 3) && u->https && o[3] && strlen(o + 3) < sizeof(u->ca)) {
			snprintf(u->ca, sizeof(u->ca), "%s", o + 3);
		} else {
			vp_set_err(err, errlen, "%s: unknown option '%s': prefix=P, user=FILE, ca=FILE (clickhouses://)", url, o);
			return -EINVAL;
		}
		o = next;
	}
	return 0;
}

struct buf {
	char *p;
	size_t n, cap;
};

static size_t collect(char *ptr, size_t size, size_t n, void *ctx)
{
	struct buf *b = ctx;
	size_t len = size * n;
	if (vp_grow((void **)&b->p, &b->cap, b->n + len + 1, 1))
		return 0;
	memcpy(b->p + b->n, ptr, len);
	b->n += len;
	b->p[b->n] = '\0';
	return len;
}

int vp_fleet__query(const struct vp_fleet_url *u, const char *sql, const char *body, size_t bodylen, char **out,
		    char *err, size_t errlen)
{
	static bool inited;
	if (!inited) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		inited = true;
	}
	if (out)
		*out = NULL;
	CURL *h = curl_easy_init();
	if (!h) {
		vp_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	struct buf b = { 0 };
	char cerr[CURL_ERROR_SIZE] = "";
	char *url = NULL, *esc = NULL;
	int e = 0;
	if (body) {
		/* An INSERT: the statement in the URL, its rows as the body. */
		esc = curl_easy_escape(h, sql, 0);
		if (asprintf(&url, "%s://%s%s%s:%s/?insert_distributed_sync=1&query=%s", u->https ? "https" : "http",
			     strchr(u->host, ':') ? "[" : "", u->host, strchr(u->host, ':') ? "]" : "", u->port,
			     esc ? esc : "") < 0)
			url = NULL;
	} else if (asprintf(&url, "%s://%s%s%s:%s/?max_query_size=67108864", u->https ? "https" : "http",
			    strchr(u->host, ':') ? "[" : "", u->host, strchr(u->host, ':') ? "]" : "", u->port) < 0) {
		url = NULL;
	}
	if (!url) {
		vp_set_err(err, errlen, "out of memory");
		e = -ENOMEM;
		goto cleanup;
	}
	struct curl_slist *hdr = curl_slist_append(NULL, "Expect:");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : sql);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? bodylen : strlen(sql)));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 600L);
	if (u->auth[0]) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERPWD, u->auth);
	}
	if (u->ca[0]) {
		curl_easy_setopt(h, CURLOPT_CAINFO, u->ca);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	CURLcode r = curl_easy_perform(h);
	curl_slist_free_all(hdr);
	long code = 0;
	if (r != CURLE_OK) {
		vp_set_err(err, errlen, "ClickHouse at %s:%s: %s%s", u->host, u->port, cerr[0] ? cerr : curl_easy_strerror(r),
			   r == CURLE_PEER_FAILED_VERIFICATION
			   ? " (the server's certificate is not signed by a CA of ?ca=FILE, or the system's, or does not "
			     "name the host of the URL)" : " (is the server up, and its HTTP port this one?)");
		e = r == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO;
		goto cleanup;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		const char *m = b.p ? b.p : "";
		vp_set_err(err, errlen, "ClickHouse at %s:%s answered HTTP %ld: %.*s", u->host, u->port, code,
			   (int)strcspn(m, "\n"), m);
		e = code == 401 || code == 403 || code == 516 ? -EACCES : -EIO;
		goto cleanup;
	}
	if (out) {
		if (!b.p && !(b.p = calloc(1, 1))) {
			e = -ENOMEM;
			goto cleanup;
		}
		*out = b.p;
		b.p = NULL;
	}
cleanup:
	free(b.p);
	free(url);
	curl_free(esc);
	curl_easy_cleanup(h);
	return e;
}

/* The columns, once: the local tables and the Distributed ones are made from them. */
static const char stacks_cols[] =
	"(hash UInt64, names Array(String), images Array(String), layers Array(UInt8), tiers Array(UInt8))";
static const char samples_cols[] =
	"(ts DateTime, host String, service String, interval_id String, pid UInt32, tid UInt32, thread String, "
	"container String, event String, unit String, event_idx UInt8, layer UInt8, offcpu String, gc_epoch UInt32, "
	"stack_hash UInt64, samples UInt64, weight UInt64)";

void vp_fleet__insert_sql(const char *db, const char *prefix, const char *table, char *out, size_t outlen)
{
	snprintf(out, outlen, "INSERT INTO %s.%s%s FORMAT TabSeparated", db, prefix, table);
}

int vp_fleet__init(const struct vp_fleet_url *u, const char *cluster, char *err, size_t errlen)
{
	char sql[2048], *ans = NULL;
	int e;
	if (cluster && !vp_fleet__ident_ok(cluster)) {
		vp_set_err(err, errlen, "cluster '%s': letters, digits and '_' only", cluster);
		return -EINVAL;
	}
	if (cluster) {
		snprintf(sql, sizeof(sql), "SELECT count() FROM system.clusters WHERE cluster = '%s'", cluster);
		if ((e = vp_fleet__query(u, sql, NULL, 0, &ans, err, errlen)))
			return e;
		long n = strtol(ans, NULL, 10);
		free(ans);
		if (n <= 0) {
			vp_set_err(err, errlen, "ClickHouse at %s:%s knows no cluster '%s' (remote_servers in its config): name "
				   "one with --cluster, or give --cluster none for one server", u->host, u->port, cluster);
			return -ENOENT;
		}
	}
	snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", u->db);
	if ((e = vp_fleet__query(u, sql, NULL, 0, NULL, err, errlen)))
		return e;
	const char *local = cluster ? "_local" : "";
	/* Stacks: one row per hash however often it is sent. */
	snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS %s.%sstacks%s %s ENGINE = ReplacingMergeTree() ORDER BY hash",
		 u->db, u->prefix, local, stacks_cols);
	if ((e = vp_fleet__query(u, sql, NULL, 0, NULL, err, errlen)))
		return e;
	/* Samples: the sort key starts with the service and the host, so one host's one
	 * service is one run of rows (and, sharded by them, on one shard); the interval's
	 * name and every field that tells two rows of one interval apart follow, so that an
	 * interval sent again replaces its own rows when parts merge (and FINAL at once). */
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE IF NOT EXISTS %s.%ssamples%s %s ENGINE = ReplacingMergeTree() PARTITION BY toYYYYMMDD(ts) "
		 "ORDER BY (service, host, interval_id, stack_hash, event, pid, tid, thread, ts, gc_epoch)",
		 u->db, u->prefix, local, samples_cols);
	if ((e = vp_fleet__query(u, sql, NULL, 0, NULL, err, errlen)))
		return e;
	if (!cluster)
		return 0;
	snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS %s.%sstacks %s ENGINE = Distributed(%s, %s, %sstacks_local, hash)",
		 u->db, u->prefix, stacks_cols, cluster, u->db, u->prefix);
	if ((e = vp_fleet__query(u, sql, NULL, 0, NULL, err, errlen)))
		return e;
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE IF NOT EXISTS %s.%ssamples %s ENGINE = Distributed(%s, %s, %ssamples_local, "
		 "cityHash64(service, host))", u->db, u->prefix, samples_cols, cluster, u->db, u->prefix);
	return vp_fleet__query(u, sql, NULL, 0, NULL, err, errlen);
}
