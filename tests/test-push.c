/* The push targets' options and the service's own metrics (issue 27), without a
 * network: --push specs parsed (kinds, paths, ports, credential files and their
 * modes, the refusals with their reasons), and the Prometheus exposition of the
 * counters (every family typed, push series labelled by target, label values escaped). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/metrics.h"
#include "daemon/push.h"
#include "test.h"
#include "test-run.h"

static char dir[] = "/tmp/vp-test-push-XXXXXX";

static const char *file(const char *name, const char *text, mode_t mode)
{
	static char path[8][300];
	static int n;
	char *p = path[n++ % 8];
	snprintf(p, 300, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	ASSERT_NOT_NULL(f);
	fputs(text, f);
	fclose(f);
	ASSERT_EQ(chmod(p, mode), 0);
	return p;
}

static void refused(const char *spec, const char *why)
{
	struct vp_push_target t;
	char err[768] = "";
	ASSERT_NE(vp_push__parse(spec, &t, err, sizeof(err)), 0);
	fprintf(stderr, "%s -> %s\n", spec, err);
	ASSERT_CONTAINS(err, why);
}

static void test_parse(void)
{
	struct vp_push_target t;
	char err[768], spec[600];
	ASSERT_OK(vp_push__parse("pyroscope=http://127.0.0.1:4040", &t, err, sizeof(err)));
	ASSERT_EQ(t.kind, VP_PUSH_PYROSCOPE);
	ASSERT_STREQ(t.host, "127.0.0.1");
	ASSERT_STREQ(t.port, "4040");
	ASSERT_STREQ(t.path, "/ingest");
	ASSERT_STREQ(t.auth, "");
	/* Under a base path, and the default port. */
	ASSERT_OK(vp_push__parse("pyroscope=http://pyro.internal/base/", &t, err, sizeof(err)));
	ASSERT_STREQ(t.host, "pyro.internal");
	ASSERT_STREQ(t.port, "80");
	ASSERT_STREQ(t.path, "/base/ingest");
	/* OTLP: the default path, or the one given; IPv6 literals. */
	ASSERT_OK(vp_push__parse("otlp=http://[::1]:4318", &t, err, sizeof(err)));
	ASSERT_EQ(t.kind, VP_PUSH_OTLP);
	ASSERT_STREQ(t.host, "::1");
	ASSERT_STREQ(t.port, "4318");
	ASSERT_STREQ(t.path, "/v1development/profiles");
	ASSERT_OK(vp_push__parse("otlp=http://10.0.0.1:4318/custom/profiles", &t, err, sizeof(err)));
	ASSERT_STREQ(t.path, "/custom/profiles");

	/* Credentials from files only open to their owner. */
	snprintf(spec, sizeof(spec), "otlp=http://127.0.0.1:4318,bearer=%s",
		 file("tok", "a-token-of-24-characters\n", 0600));
	ASSERT_OK(vp_push__parse(spec, &t, err, sizeof(err)));
	ASSERT_STREQ(t.auth, "Bearer a-token-of-24-characters");
	snprintf(spec, sizeof(spec), "pyroscope=http://127.0.0.1:4040,basic=%s", file("basic", "viprof:s3cret\n", 0600));
	ASSERT_OK(vp_push__parse(spec, &t, err, sizeof(err)));
	ASSERT_STREQ(t.auth, "Basic dmlwcm9mOnMzY3JldA==");
	snprintf(spec, sizeof(spec), "pyroscope=http://127.0.0.1:4040,basic=%s", file("open", "viprof:s3cret\n", 0644));
	refused(spec, "chmod 600");
	snprintf(spec, sizeof(spec), "pyroscope=http://127.0.0.1:4040,basic=%s", file("nocolon", "viprof\n", 0600));
	refused(spec, "user:password");
	snprintf(spec, sizeof(spec), "pyroscope=http://127.0.0.1:4040,basic=%s/missing", dir);
	refused(spec, "cannot read it");

	/* https with its files (issue 31): the CAs, a client certificate and its key (the key
	 * open to its owner only); unix: sockets with an HTTP path of their own. */
	ASSERT_OK(vp_push__parse("pyroscope=https://pyro.internal", &t, err, sizeof(err)));
	ASSERT_EQ(t.scheme, VP_PUSH_HTTPS);
	ASSERT_STREQ(t.port, "443");
	ASSERT_STREQ(t.ca, "");
	const char *ca = file("ca.pem", "-----BEGIN CERTIFICATE-----\n", 0644);
	const char *crt = file("c.pem", "-----BEGIN CERTIFICATE-----\n", 0644);
	const char *key = file("k.pem", "-----BEGIN PRIVATE KEY-----\n", 0600);
	snprintf(spec, sizeof(spec), "otlp=https://127.0.0.1:4318,ca=%s,cert=%s,key=%s", ca, crt, key);
	ASSERT_OK(vp_push__parse(spec, &t, err, sizeof(err)));
	ASSERT_STREQ(t.ca, ca);
	ASSERT_STREQ(t.cert, crt);
	ASSERT_STREQ(t.key, key);
	ASSERT_STREQ(t.path, "/v1development/profiles");
	snprintf(spec, sizeof(spec), "otlp=https://127.0.0.1:4318,cert=%s,key=%s", crt,
		 file("k2.pem", "-----BEGIN PRIVATE KEY-----\n", 0640));
	refused(spec, "chmod 600");
	snprintf(spec, sizeof(spec), "otlp=https://127.0.0.1:4318,cert=%s", crt);
	refused(spec, "both cert=FILE and key=FILE");
	snprintf(spec, sizeof(spec), "otlp=http://127.0.0.1:4318,ca=%s", ca);
	refused(spec, "is for https://");
	snprintf(spec, sizeof(spec), "otlp=https://127.0.0.1:4318,ca=%s/missing", dir);
	refused(spec, "cannot read it");
	ASSERT_OK(vp_push__parse("otlp=unix:/run/otelcol/otlp.sock", &t, err, sizeof(err)));
	ASSERT_EQ(t.scheme, VP_PUSH_UNIX);
	ASSERT_STREQ(t.sock, "/run/otelcol/otlp.sock");
	ASSERT_STREQ(t.path, "/v1development/profiles");
	ASSERT_OK(vp_push__parse("pyroscope=unix:/run/pyro.sock,path=/base", &t, err, sizeof(err)));
	ASSERT_STREQ(t.path, "/base/ingest");
	refused("otlp=unix:relative.sock", "unix:/ABSOLUTE/PATH");
	refused("otlp=https://127.0.0.1:4318,path=/x", "unknown option");
	refused("pyroscope=http://user:pw@127.0.0.1:4040", "no credentials in the URL");
	refused("jaeger=http://127.0.0.1:1", "unknown kind");
	refused("http://127.0.0.1:4040", "expected pyroscope=URL");
	refused("otlp=127.0.0.1:4318", "must start with https://, http:// or unix:/");
	refused("otlp=http://127.0.0.1:99999", "HOST[:PORT]");
	refused("otlp=http://127.0.0.1:4318,token=x", "unknown option");

	/* clickhouse (issue 36): the database and the prefix go into SQL, so only names. */
	ASSERT_OK(vp_push__parse("clickhouse=http://10.0.0.1:8123", &t, err, sizeof(err)));
	ASSERT_EQ(t.kind, VP_PUSH_CLICKHOUSE);
	ASSERT_STREQ(t.db, "viprof");
	ASSERT_STREQ(t.prefix, "viprof_");
	ASSERT_STREQ(t.path, "/");
	ASSERT_OK(vp_push__parse("clickhouse=https://ch.internal/base,database=prof,prefix=p1_", &t, err, sizeof(err)));
	ASSERT_STREQ(t.db, "prof");
	ASSERT_STREQ(t.prefix, "p1_");
	ASSERT_STREQ(t.path, "/base/");
	ASSERT_STREQ(t.port, "443");
	refused("clickhouse=http://10.0.0.1:8123,database=x;DROP", "letters, digits and '_' only");
	refused("clickhouse=http://10.0.0.1:8123,prefix=a.b", "letters, digits and '_' only");
	refused("otlp=http://10.0.0.1:4318,database=x", "unknown option");
}

static void test_metrics(void)
{
	struct vp_svc_metrics m;
	vp_svc_metrics__init(&m);
	m.samples = 100;
	m.cur_samples = 23;
	m.intervals = 4;
	m.scrapes = 2;
	int i = vp_svc_metrics__add_push(&m, "pyroscope http://127.0.0.1:4040/a\"b");
	ASSERT_EQ(i, 0);
	m.push[i].ok = 3;
	m.push[i].failed = 5;
	m.push[i].queued = 2;
	char *buf = NULL;
	size_t len = 0;
	ASSERT_OK(vp_svc_metrics__render(&m, &buf, &len));
	ASSERT_EQ(strlen(buf), len);
	ASSERT_CONTAINS(buf, "# TYPE viprof_samples_total counter\nviprof_samples_total 123\n");
	ASSERT_CONTAINS(buf, "viprof_intervals_total 4\n");
	ASSERT_CONTAINS(buf, "# TYPE viprof_push_queue_depth gauge\n");
	ASSERT_CONTAINS(buf, "viprof_push_success_total{target=\"pyroscope http://127.0.0.1:4040/a\\\"b\"} 3\n");
	ASSERT_CONTAINS(buf, "viprof_push_failures_total{target=\"pyroscope http://127.0.0.1:4040/a\\\"b\"} 5\n");
	ASSERT_CONTAINS(buf, "viprof_service_cpu_seconds_total ");
	/* Every sample line belongs to a family declared just before it. */
	for (char *l = buf; *l; l = strchr(l, '\n') + 1) {
		if (*l != '#') {
			char name[128];
			ASSERT_EQ(sscanf(l, "%127[a-z_]", name), 1);
			char want[160];
			snprintf(want, sizeof(want), "# TYPE %s ", name);
			ASSERT_CONTAINS(buf, want);
		}
	}
	free(buf);
	ASSERT_OK(vp_svc_metrics__json(&m, &buf, &len));
	ASSERT_CONTAINS(buf, "\"samples_total\": 123");
	ASSERT_CONTAINS(buf, "\"target\": \"pyroscope http://127.0.0.1:4040/a\\\"b\"");
	free(buf);
	vp_svc_metrics__fini(&m);
}

int main(void)
{
	ASSERT_NOT_NULL(mkdtemp(dir));
	test_parse();
	test_metrics();
	char cmd[100];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	printf("test-push: ok\n");
	return 0;
}
