/* The service's own figures: see metrics.h. */
#define _GNU_SOURCE
#include "daemon/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "daemon/rec.h"

void vp_svc_metrics__init(struct vp_svc_metrics *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
}

void vp_svc_metrics__fini(struct vp_svc_metrics *m)
{
	pthread_mutex_destroy(&m->lock);
}

int vp_svc_metrics__add_push(struct vp_svc_metrics *m, const char *target)
{
	pthread_mutex_lock(&m->lock);
	int i = m->npush < VP_METRICS_MAX_PUSH ? m->npush++ : -1;
	if (i >= 0)
		snprintf(m->push[i].target, sizeof(m->push[i].target), "%s", target);
	pthread_mutex_unlock(&m->lock);
	return i;
}

/* Resident memory from /proc/self/statm (pages), 0 when unreadable. */
static uint64_t rss_bytes(void)
{
	unsigned long size, res;
	FILE *f = fopen("/proc/self/statm", "re");
	if (!f)
		return 0;
	int n = fscanf(f, "%lu %lu", &size, &res);
	fclose(f);
	return n == 2 ? (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* A label value in the exposition format: backslash, quote and newline escaped. */
static void label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void metric(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, (unsigned long long)v);
}

/* One family with a series per push target. */
static void push_metric(FILE *f, const struct vp_svc_metrics *m, const char *name, const char *type,
			const char *help, size_t field)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	for (int i = 0; i < m->npush; i++) {
		fprintf(f, "%s{target=\"", name);
		label_value(f, m->push[i].target);
		fprintf(f, "\"} %llu\n", (unsigned long long)*(const uint64_t *)((const char *)&m->push[i] + field));
	}
}

static void seconds(FILE *f, const char *name, const char *help, uint64_t ns)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %.6f\n", name, help, name, name, (double)ns / 1e9);
}

int vp_svc_metrics__render(struct vp_svc_metrics *m, char **buf, size_t *len)
{
	*buf = NULL;
	*len = 0;
	uint64_t cpu = vp_svc__cpu_ns(), rss = rss_bytes();
	FILE *f = open_memstream(buf, len);
	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	struct vp_svc_metrics c = *m;   /* a consistent copy; the lock is not copied's to use */
	pthread_mutex_unlock(&m->lock);
	metric(f, "viprof_samples_total", "counter",
	       "Samples taken by the continuous whole-VM recording (ended intervals and the current one).",
	       c.samples + c.cur_samples);
	metric(f, "viprof_lost_samples_total", "counter", "Samples the continuous recording lost (ring buffer full).",
	       c.lost + c.cur_lost);
	metric(f, "viprof_intervals_total", "counter", "Continuous intervals ended (each a session on disk).",
	       c.intervals);
	metric(f, "viprof_interval_errors_total", "counter", "Continuous intervals that ended with an error.",
	       c.interval_errors);
	metric(f, "viprof_interval_bytes_total", "counter", "Bytes on disk of the ended intervals' sessions.", c.bytes);
	metric(f, "viprof_sample_rate_hertz", "gauge", "The continuous recording's sampling rate now (0: none).",
	       c.freq);
	fprintf(f, "# HELP viprof_service_cpu_seconds_total CPU time (user + system) of the whole service process.\n"
		   "# TYPE viprof_service_cpu_seconds_total counter\nviprof_service_cpu_seconds_total %.6f\n",
		(double)cpu / 1e9);
	metric(f, "viprof_service_resident_memory_bytes", "gauge", "Resident memory of the service process.", rss);
	seconds(f, "viprof_service_jvm_attach_cpu_seconds_total",
		"CPU time the continuous recording spent attaching its agent to JVMs (ended intervals).", c.jvm_cpu_ns);
	seconds(f, "viprof_service_rotation_cpu_seconds_total",
		"CPU time of the continuous recording's interval boundaries (ended intervals; their attaches included).",
		c.rotate_cpu_ns);
	seconds(f, "viprof_service_unwind_tables_seconds_total",
		"Time the stack walker spent building or loading unwind tables (ended intervals).", c.tables_ns);
	metric(f, "viprof_profile_requests_total", "counter", "GET /debug/pprof/profile requests answered.",
	       c.profile_requests);
	metric(f, "viprof_scrapes_total", "counter", "GET /metrics requests served (this one included).", c.scrapes);
	push_metric(f, &c, "viprof_push_success_total", "counter", "Push attempts the backend accepted (2xx).",
		    offsetof(struct vp_push_counts, ok));
	push_metric(f, &c, "viprof_push_failures_total", "counter",
		    "Push attempts that failed (no connection, timeout, or a non-2xx answer).",
		    offsetof(struct vp_push_counts, failed));
	push_metric(f, &c, "viprof_push_intervals_sent_total", "counter", "Intervals delivered to the backend.",
		    offsetof(struct vp_push_counts, sent));
	push_metric(f, &c, "viprof_push_dropped_total", "counter",
		    "Intervals dropped, oldest first, because the push queue was full.",
		    offsetof(struct vp_push_counts, dropped));
	push_metric(f, &c, "viprof_push_rejected_total", "counter",
		    "Intervals dropped because the backend refused them with a 4xx a retry cannot change.",
		    offsetof(struct vp_push_counts, rejected));
	push_metric(f, &c, "viprof_push_refused_total", "counter",
		    "Push attempts not made: the target's socket belongs to a user other than root or --push-owner.",
		    offsetof(struct vp_push_counts, refused));
	push_metric(f, &c, "viprof_push_queue_depth", "gauge", "Intervals waiting in the push queue.",
		    offsetof(struct vp_push_counts, queued));
	push_metric(f, &c, "viprof_push_queue_bytes", "gauge", "Bytes of the intervals waiting in the push queue.",
		    offsetof(struct vp_push_counts, queued_bytes));
	return fclose(f) == 0 ? 0 : -ENOMEM;
}

int vp_svc_metrics__json(struct vp_svc_metrics *m, char **buf, size_t *len)
{
	*buf = NULL;
	*len = 0;
	uint64_t cpu = vp_svc__cpu_ns(), rss = rss_bytes();
	FILE *f = open_memstream(buf, len);
	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	struct vp_svc_metrics c = *m;
	pthread_mutex_unlock(&m->lock);
	fprintf(f, "\"samples_total\": %llu, \"lost_samples_total\": %llu, \"intervals_total\": %llu, "
		   "\"interval_errors_total\": %llu, \"interval_bytes_total\": %llu, \"service_cpu_seconds_total\": %.6f, "
		   "\"service_resident_memory_bytes\": %llu, \"profile_requests_total\": %llu, \"scrapes_total\": %llu, "
		   "\"jvm_attach_cpu_seconds_total\": %.6f, \"rotation_cpu_seconds_total\": %.6f, "
		   "\"unwind_tables_seconds_total\": %.6f, \"push\": [",
		(unsigned long long)(c.samples + c.cur_samples), (unsigned long long)(c.lost + c.cur_lost),
		(unsigned long long)c.intervals, (unsigned long long)c.interval_errors, (unsigned long long)c.bytes,
		(double)cpu / 1e9, (unsigned long long)rss, (unsigned long long)c.profile_requests,
		(unsigned long long)c.scrapes, (double)c.jvm_cpu_ns / 1e9, (double)c.rotate_cpu_ns / 1e9,
		(double)c.tables_ns / 1e9);
	for (int i = 0; i < c.npush; i++) {
		fprintf(f, "%s{\"target\": ", i ? ", " : "");
		vp_json_fputs(f, c.push[i].target, 0);
		fprintf(f, ", \"success_total\": %llu, \"failures_total\": %llu, \"sent_total\": %llu, "
			   "\"dropped_total\": %llu, \"rejected_total\": %llu, \"refused_total\": %llu, "
			   "\"queue_depth\": %llu, \"queue_bytes\": %llu}",
			(unsigned long long)c.push[i].ok, (unsigned long long)c.push[i].failed,
			(unsigned long long)c.push[i].sent, (unsigned long long)c.push[i].dropped,
			(unsigned long long)c.push[i].rejected, (unsigned long long)c.push[i].refused,
			(unsigned long long)c.push[i].queued, (unsigned long long)c.push[i].queued_bytes);
	}
	fputs("]", f);
	return fclose(f) == 0 ? 0 : -ENOMEM;
}
