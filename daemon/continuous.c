/* Continuous recording, retention and the CPU budget: see continuous.h. */
#define _GNU_SOURCE
#include "daemon/continuous.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"
#include "daemon/metrics.h"
#include "daemon/rec.h"

uint64_t vp_budget__next_freq(uint64_t cur, uint64_t want, uint64_t min, double used_pct, double budget_pct)
{
	if (budget_pct <= 0 || used_pct < 0)
		return cur;
	if (used_pct > budget_pct) {
		double f = (double)cur * budget_pct / used_pct * 0.9;
		return f < (double)min ? min : (uint64_t)f;
	}
	if (used_pct < budget_pct / 2 && cur < want) {
		double f = (double)cur * 1.5;
		if (used_pct > 0 && f > (double)cur * budget_pct / used_pct * 0.9)
			f = (double)cur * budget_pct / used_pct * 0.9;
		if (f > (double)want)
			f = (double)want;
		return f < (double)cur ? cur : (uint64_t)f;
	}
	return cur;
}

bool vp_interval__name_ok(const char *name)
{
	/* YYYYmmddTHHMMSSZ */
	if (strlen(name) != VP_INTERVAL_NAME_LEN || name[8] != 'T' || name[15] != 'Z')
		return false;
	for (int i = 0; i < 15; i++)
		if (i != 8 && !isdigit((unsigned char)name[i]))
			return false;
	return true;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

int vp_retention__apply(int dirfd, time_t now, unsigned interval_s, uint64_t keep_age_s, uint64_t keep_bytes,
			const char *keep, FILE *log)
{
	typedef char name_t[VP_INTERVAL_NAME_LEN + 1];
	name_t *names = NULL;
	uint64_t *bytes = NULL;
	size_t n = 0, cap = 0, bcap = 0;
	int e = 0, removed = 0;
	DIR *d = vp_dir__stream(dirfd);
	if (!d)
		return -errno;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!vp_interval__name_ok(de->d_name))
			continue;
		if (vp_grow((void **)&names, &cap, n + 1, sizeof(*names))) {
			e = -ENOMEM;
			goto cleanup;
		}
		memcpy(names[n++], de->d_name, sizeof(name_t));
	}
	vp_sort(names, n, sizeof(*names), cmp_name);
	if (vp_grow((void **)&bytes, &bcap, n + 1, sizeof(*bytes))) {
		e = -ENOMEM;
		goto cleanup;
	}
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		int sfd = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		bytes[i] = sfd >= 0 ? vp_dir__usage(sfd) : 0;
		if (sfd >= 0)
			close(sfd);
		total += bytes[i];
	}
	for (size_t i = 0; i < n; i++) {
		if (keep && !strcmp(names[i], keep))
			continue;
		struct tm tm = { 0 };
		char *end = strptime(names[i], VP_INTERVAL_FMT, &tm);
		time_t start = end && !*end ? timegm(&tm) : now;
		uint64_t age = now > start + (time_t)interval_s ? (uint64_t)(now - start - (time_t)interval_s) : 0;
		bool too_old = keep_age_s && age > keep_age_s;
		bool too_big = keep_bytes && total > keep_bytes;
		if (!too_old && !too_big)
			break;   /* oldest first: the rest are younger, and the total fits */
		int r = vp_safe_remove_tree(dirfd, names[i]);
		if (log)
			fprintf(log, "viprof serve: continuous: %s %s (%s, %llu KiB)%s%s\n", r ? "cannot remove" : "removed",
				names[i], too_old ? "older than --keep-age" : "over --keep-bytes",
				(unsigned long long)(bytes[i] / 1024), r ? ": " : "", r ? strerror(-r) : "");
		if (r) {
			e = r;
			continue;
		}
		total -= bytes[i];
		removed++;
	}
cleanup:
	closedir(d);
	free(names);
	free(bytes);
	return e && !removed ? e : removed;
}

struct vp_cont {
	struct vp_cont_opts o;
	int dirfd;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stopping;
	char current[VP_INTERVAL_NAME_LEN + 1];
	char lasterr[512];
	uint64_t freq;
	char *dir;
	vp_cont_ended_fn ended;    /* or NULL */
	void *ended_ctx;
	uint64_t counts_at;        /* when the metrics' live counts are read next (monotonic ns) */
};

static void set_error(struct vp_cont *c, const char *msg)
{
	pthread_mutex_lock(&c->lock);
	snprintf(c->lasterr, sizeof(c->lasterr), "%s", msg);
	pthread_mutex_unlock(&c->lock);
	if (c->o.log)
		fprintf(c->o.log, "viprof serve: continuous: %s\n", msg);
}

/* service.json: what the service measured for one interval (docs/formats.md). Written
 * whole to a temporary name and renamed over, so that a full disk leaves the old file
 * (or none), never an empty or torn one. */
/* What an ended interval held. */
struct interval_stats {
	uint64_t samples, lost, bytes;
	uint64_t rss_peak;       /* the service's peak resident memory in the interval, bytes */
	struct vp_svc_rec_costs cost;   /* the interval's share of them (table_files: the total) */
	bool failed;
};

/* The interval's costs: the recorder's running totals now, less those at the last
 * interval's end (*last, updated; zeroed by the caller for a new recorder). */
static void interval_costs(const struct vp_svc_rec *r, struct vp_svc_rec_costs *last, struct vp_svc_rec_costs *out)
{
	struct vp_svc_rec_costs now;
	vp_svc_rec__costs(r, &now);
	/* Never below zero, whatever a recorder's figures do. */
#define VP_DELTA(f) (now.f > last->f ? now.f - last->f : 0)
	*out = (struct vp_svc_rec_costs){ VP_DELTA(jvm_cpu_ns), VP_DELTA(rotate_cpu_ns), VP_DELTA(tables_ns),
					  now.table_files };
#undef VP_DELTA
	*last = now;
}

static void write_interval_file(struct vp_cont *c, const char *name, uint64_t freq, uint64_t wall_ns,
				uint64_t cpu_ns, double pct, uint64_t next, const struct interval_stats *st)
{
	static const char tmp[] = "." VP_CONT_FILE ".tmp";
	int sfd = openat(c->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return;   /* the recorder made no session: its error was logged */
	unlinkat(sfd, tmp, 0);   /* a crash's leftover: ours, in a directory only root writes */
	int fd = vp_safe_create(sfd, tmp, 0600);
	if (fd < 0) {
		close(sfd);
		set_error(c, "cannot write service.json of an interval");
		return;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlinkat(sfd, tmp, 0);
		close(sfd);
		return;
	}
	fprintf(f, "{\n  \"format_version\": 1,\n  \"interval_s\": %u,\n  \"wall_ns\": %llu,\n  \"freq\": %llu,\n"
		   "  \"cpu_ns\": %llu,\n  \"cpu_pct\": %.3f,\n  \"cpu_budget_pct\": %.3f,\n  \"next_freq\": %llu,\n"
		   "  \"samples\": %llu,\n  \"lost\": %llu,\n  \"bytes\": %llu,\n  \"rss_peak_bytes\": %llu,\n"
		   "  \"jvm_attach_cpu_ns\": %llu,\n  \"rotation_cpu_ns\": %llu,\n  \"unwind_tables_ns\": %llu",
		c->o.interval_s, (unsigned long long)wall_ns, (unsigned long long)freq, (unsigned long long)cpu_ns, pct,
		c->o.cpu_budget_pct, (unsigned long long)next, (unsigned long long)st->samples,
		(unsigned long long)st->lost, (unsigned long long)st->bytes, (unsigned long long)st->rss_peak,
		(unsigned long long)st->cost.jvm_cpu_ns, (unsigned long long)st->cost.rotate_cpu_ns,
		(unsigned long long)st->cost.tables_ns);
	/* The service's running totals, the figures of GET /metrics, as of this interval's end. */
	char *mj = NULL;
	size_t mlen = 0;
	if (c->o.metrics && vp_svc_metrics__json(c->o.metrics, &mj, &mlen) == 0)
		fprintf(f, ",\n  \"service\": {%s}", mj);
	free(mj);
	fputs("\n}\n", f);
	bool ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
	int e = errno;
	ok = fclose(f) == 0 && ok;
	if (!ok || renameat(sfd, tmp, sfd, VP_CONT_FILE) != 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "cannot write %s/%s: %s; the old one (if any) is kept", name, VP_CONT_FILE,
			 strerror(ok ? errno : e));
		unlinkat(sfd, tmp, 0);
		set_error(c, msg);
	}
	close(sfd);
}

/* Each interval's recorder attaches again, and the agent moves to that interval's
 * jit/<pid>/ with the live code replayed; a JVM it did not reach (attach refused or
 * failed) keeps its maps in an earlier interval. The code-map file is one append-only,
 * time-stamped stream, so a hard link of it in this interval's jit/<pid>/ gives this
 * session the JVM's maps; retention removing the old interval removes only a name.
 * Done for JVMs still running whose maps this interval lacks. */
static void carry_maps(struct vp_cont *c, const char *name)
{
	char jit[VP_INTERVAL_NAME_LEN + 8];
	snprintf(jit, sizeof(jit), "%s/jit", name);
	int nj = openat(c->dirfd, jit, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nj < 0)
		return;
	DIR *d = vp_dir__stream(c->dirfd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!vp_interval__name_ok(de->d_name) || strcmp(de->d_name, name) >= 0)
			continue;   /* only earlier intervals */
		char oj[300];
		snprintf(oj, sizeof(oj), "%s/jit", de->d_name);
		int oldj = openat(c->dirfd, oj, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int ofd = oldj >= 0 ? openat(oldj, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		DIR *pd = ofd >= 0 ? fdopendir(ofd) : NULL;
		struct dirent *pe;
		while (pd && (pe = readdir(pd))) {
			long long pid = vp_parse_num(pe->d_name, 1, 1 << 30);
			struct stat st;
			char have[300];
			snprintf(have, sizeof(have), "%s/codemap.vpm", pe->d_name);
			if (pid < 0 || (kill((pid_t)pid, 0) != 0 && errno != EPERM) ||
			    fstatat(nj, have, &st, AT_SYMLINK_NOFOLLOW) == 0)
				continue;   /* gone, or this interval has its maps already */
			int src = openat(oldj, pe->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			/* The pid's directory is the JVM user's (the session writer admits it). */
			struct stat ss;
			int dst = src >= 0 && fstat(src, &ss) == 0 ? vp_safe_mkdirat(nj, pe->d_name, 0700, ss.st_uid, NULL) : -1;
			int sfd2 = src >= 0 ? openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
			DIR *fd3 = sfd2 >= 0 ? fdopendir(sfd2) : NULL;
			struct dirent *fe;
			int linked = 0;
			while (dst >= 0 && fd3 && (fe = readdir(fd3))) {
				struct stat fs;
				if (strncmp(fe->d_name, "codemap", 7) || fstatat(src, fe->d_name, &fs, AT_SYMLINK_NOFOLLOW) ||
				    !S_ISREG(fs.st_mode))
					continue;
				if (linkat(src, fe->d_name, dst, fe->d_name, 0) == 0)
					linked++;
			}
			if (fd3)
				closedir(fd3);
			else if (sfd2 >= 0)
				close(sfd2);
			if (c->o.log && linked)
				fprintf(c->o.log, "viprof serve: continuous: %s: JVM %lld's code maps carried over from %s\n",
					name, pid, de->d_name);
			if (dst >= 0)
				close(dst);
			if (src >= 0)
				close(src);
		}
		if (pd)
			closedir(pd);
		else if (ofd >= 0)
			close(ofd);
		if (oldj >= 0)
			close(oldj);
	}
	if (d)
		closedir(d);
	close(nj);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits until deadline (monotonic ns) or stop; true when asked to stop. */
#define VP_CONT_SLOW_DRAIN_FREQ 999   /* Hz: at or below, the recorder is drained once a second */

static bool wait_until(struct vp_cont *c, uint64_t deadline, struct vp_svc_rec *r, bool *failed)
{
	for (;;) {
		pthread_mutex_lock(&c->lock);
		bool stop = c->stopping;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			return true;
		uint64_t now = mono_ns();
		if (now >= deadline)
			return false;
		uint64_t left_ms = (deadline - now) / 1000000;
		/* Each drain is a wake-up of the service: once a second at the fleet rates
		 * (the ring buffer holds seconds of samples), five times at high ones. */
		int period = c->freq <= VP_CONT_SLOW_DRAIN_FREQ ? 1000 : 200;
		int p = vp_svc_rec__poll(r, left_ms > (uint64_t)period ? period : (int)left_ms);
		if (c->o.metrics && now >= c->counts_at) {
			/* The interval so far, once a second, so that the counters rise between
			 * intervals too (reading the sampler's per-CPU counts every 200 ms was 4%
			 * of the service's CPU). */
			c->counts_at = now + 1000000000ull;
			uint64_t ns, nl;
			vp_svc_rec__counts(r, &ns, &nl);
			pthread_mutex_lock(&c->o.metrics->lock);
			c->o.metrics->cur_samples = ns;
			c->o.metrics->cur_lost = nl;
			pthread_mutex_unlock(&c->o.metrics->lock);
		}
		if (p <= 0) {
			*failed = p < 0;
			return false;
		}
	}
}

/* The name of an interval starting now that does not exist yet (one a second). */
static bool next_name(struct vp_cont *c, char name[VP_INTERVAL_NAME_LEN + 1])
{
	time_t t = time(NULL);
	struct tm tm;
	strftime(name, VP_INTERVAL_NAME_LEN + 1, VP_INTERVAL_FMT, gmtime_r(&t, &tm));
	return faccessat(c->dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
}

/* The service's peak resident memory since the last call (VmHWM, then reset through
 * clear_refs so that the next interval's peak is its own), in bytes; 0 if unknown. */
static uint64_t rss_peak_reset(void)
{
	char text[4096];
	uint64_t kb = 0;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	const char *h = strstr(text, "\nVmHWM:");
	if (h)
		kb = strtoull(h + 7, NULL, 10);
	if ((fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "5", 1) != 1) {
			/* Not reset: the next peak is the service's so far, still a bound. */
		}
		close(fd);
	}
	return kb * 1024;
}

/* An interval's end: what it cost, in the log and in its service.json; the next rate. */
static double pct_of(uint64_t cpu, uint64_t wall)
{
	return wall ? 100.0 * (double)cpu / (double)wall : 0;
}

static void end_interval(struct vp_cont *c, const char *name, uint64_t freq, uint64_t wall, uint64_t cpu,
			 struct interval_stats *st, uint64_t next)
{
	double pct = pct_of(cpu, wall);
	uint64_t samples = st->samples;
	st->rss_peak = rss_peak_reset();
	int sfd = openat(c->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	st->bytes = sfd >= 0 ? vp_dir__usage(sfd) : 0;
	if (sfd >= 0)
		close(sfd);
	if (c->o.metrics) {
		struct vp_svc_metrics *m = c->o.metrics;
		pthread_mutex_lock(&m->lock);
		m->intervals++;
		m->interval_errors += st->failed;
		m->samples += st->samples;
		m->lost += st->lost;
		m->bytes += st->bytes;
		m->jvm_cpu_ns += st->cost.jvm_cpu_ns;
		m->rotate_cpu_ns += st->cost.rotate_cpu_ns;
		m->tables_ns += st->cost.tables_ns;
		m->cur_samples = m->cur_lost = 0;
		m->freq = next;
		pthread_mutex_unlock(&m->lock);
	}
	write_interval_file(c, name, freq, wall, cpu, pct, next, st);
	pthread_mutex_lock(&c->lock);
	vp_cont_ended_fn ended = c->ended;
	void *ended_ctx = c->ended_ctx;
	pthread_mutex_unlock(&c->lock);
	if (ended) {
		uint64_t until = (uint64_t)time(NULL), secs = (wall + 500000000ull) / 1000000000ull;
		ended(ended_ctx, name, until > secs ? until - secs : 0, until, freq);
	}
	carry_maps(c, name);
	if (c->o.log) {
		fprintf(c->o.log, "viprof serve: continuous: %s: %.1f s at %llu Hz, service CPU %.0f ms = %.2f%% of one CPU "
				  "(budget %.2f%%; JVM attaches %.0f ms, rotation %.0f ms, unwind tables %.0f ms), "
				  "memory peak %.0f MiB, %llu samples%s", name, (double)wall / 1e9,
			(unsigned long long)freq, (double)cpu / 1e6, pct, c->o.cpu_budget_pct,
			(double)st->cost.jvm_cpu_ns / 1e6, (double)st->cost.rotate_cpu_ns / 1e6,
			(double)st->cost.tables_ns / 1e6, (double)st->rss_peak / (1 << 20), (unsigned long long)samples,
			next != freq ? "" : "\n");
		if (next != freq)
			fprintf(c->o.log, "; next interval at %llu Hz%s\n", (unsigned long long)next,
				next < freq && next == VP_CONT_MIN_FREQ ? " (the lowest rate; the budget is still missed)" : "");
		fflush(c->o.log);
	}
}

/* One recorder runs across intervals: at each boundary its session is rotated (the
 * sampler, tracer and stack walker stay loaded), so an interval costs what sampling
 * costs plus a rotation, not a recorder's start. The budget's rate is set on the
 * running sampler; the recorder is restarted only after a failure, or for a new rate
 * when the backend cannot change it live (perf). */
static void *cont_thread(void *arg)
{
	struct vp_cont *c = arg;
	struct vp_svc_rec *r = NULL;
	char name[VP_INTERVAL_NAME_LEN + 1] = "", path[4200], err[768] = "";
	uint64_t t0 = 0, cpu0 = 0, rfreq = 0;
	struct vp_svc_rec_costs last = { 0 };   /* the recorder's totals at the last interval's end */

	for (;;) {
		pthread_mutex_lock(&c->lock);
		bool stop = c->stopping;
		uint64_t freq = c->freq;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			break;

		if (!r) {
			if (!next_name(c, name)) {
				sleep(1);   /* an interval began this second already (a failed one): next second */
				continue;
			}
			snprintf(path, sizeof(path), "%s/%s", c->dir, name);
			struct vp_svc_rec_opts ro = { .parent_fd = c->dirfd, .name = name, .dir = path, .freq = freq, .max_freq = c->o.freq, .jvm = c->o.jvm, .agent = c->o.agent,
						      .no_jit = c->o.no_jit, .off_cpu = c->o.off_cpu, .log = c->o.log };
			if (!t0) {   /* else the last interval's end: a restart's cost is counted too */
				t0 = mono_ns();
				cpu0 = vp_svc__cpu_ns();
			}
			r = vp_svc_rec__start(&ro, err, sizeof(err));
			last = (struct vp_svc_rec_costs){ 0 };
			if (!r) {
				set_error(c, err);
				t0 = 0;
				pthread_mutex_lock(&c->lock);
				if (!c->stopping) {
					struct timespec ts;
					clock_gettime(CLOCK_REALTIME, &ts);
					ts.tv_sec += 10;   /* retry, without spinning */
					pthread_cond_timedwait(&c->wake, &c->lock, &ts);
				}
				pthread_mutex_unlock(&c->lock);
				continue;
			}
			rfreq = freq;
		}
		pthread_mutex_lock(&c->lock);
		snprintf(c->current, sizeof(c->current), "%s", name);
		pthread_mutex_unlock(&c->lock);

		bool failed = false;
		if (c->o.metrics) {
			pthread_mutex_lock(&c->o.metrics->lock);
			c->o.metrics->freq = rfreq;
			pthread_mutex_unlock(&c->o.metrics->lock);
		}
		bool stopping = wait_until(c, t0 + (uint64_t)c->o.interval_s * 1000000000ull, r, &failed);
		struct interval_stats ist = { 0 };
		vp_svc_rec__counts(r, &ist.samples, &ist.lost);
		char ended[VP_INTERVAL_NAME_LEN + 1];
		memcpy(ended, name, sizeof(ended));
		/* The rate for the next interval, from this one's cost so far. */
		uint64_t next = vp_budget__next_freq(rfreq, c->o.freq, VP_CONT_MIN_FREQ,
						     pct_of(vp_svc__cpu_ns() - cpu0, mono_ns() - t0), c->o.cpu_budget_pct);
		bool rotated = false;
		/* A new rate is set on the running sampler when it can (the bpf backend):
		 * only a backend that cannot change it live is restarted. */
		if (!stopping && !failed && (next == rfreq || vp_svc_rec__set_freq(r, next) == 0) && next_name(c, name)) {
			/* The boundary: the next interval begins as this one ends. */
			snprintf(path, sizeof(path), "%s/%s", c->dir, name);
			int e = vp_svc_rec__rotate(r, c->dirfd, name, path, err, sizeof(err));
			if (e)
				set_error(c, err);
			rotated = e == 0;
		}
		if (!rotated) {
			int e = vp_svc_rec__stop(r, err, sizeof(err));
			vp_svc_rec__counts(r, &ist.samples, &ist.lost);
			interval_costs(r, &last, &ist.cost);
			vp_svc_rec__free(r);
			r = NULL;
			ist.failed = e || failed;
			if (e || failed)
				set_error(c, err[0] ? err : "the interval's recording failed");
		}
		if (rotated)
			interval_costs(r, &last, &ist.cost);
		/* The rotation's (or the stop's) own work is charged to the interval it ends. */
		uint64_t t1 = mono_ns(), cpu1 = vp_svc__cpu_ns();
		end_interval(c, ended, rfreq, t1 - t0, cpu1 - cpu0, &ist, next);
		t0 = t1;
		cpu0 = cpu1;
		rfreq = next;   /* the rotated recorder samples at it now */
		pthread_mutex_lock(&c->lock);
		c->freq = next;
		c->current[0] = '\0';
		pthread_mutex_unlock(&c->lock);
		vp_retention__apply(c->dirfd, time(NULL), c->o.interval_s, c->o.keep_age_s, c->o.keep_bytes,
				    r ? name : NULL, c->o.log);
	}
	if (r) {
		/* Stopped mid-interval (SIGINT, SIGTERM): the interval ends cleanly. */
		int e = vp_svc_rec__stop(r, err, sizeof(err));
		if (e)
			set_error(c, err);
		struct interval_stats ist = { .failed = e != 0 };
		vp_svc_rec__counts(r, &ist.samples, &ist.lost);
		interval_costs(r, &last, &ist.cost);
		end_interval(c, name, rfreq, mono_ns() - t0, vp_svc__cpu_ns() - cpu0, &ist, rfreq);
		vp_svc_rec__free(r);
	}
	return NULL;
}

struct vp_cont *vp_cont__start(const struct vp_cont_opts *o, char *err, size_t errlen)
{
	struct vp_cont *c = calloc(1, sizeof(*c));
	if (!c || !(c->dir = strdup(o->dir))) {
		free(c);
		vp_set_err(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	c->o = *o;
	c->freq = o->freq;
	/* Every directory above DIR must be root's alone too, or whoever may write one
	 * could rename DIR away and put another in its place: checked on the deepest part
	 * of the path that exists before anything is made, and again on DIR once open. */
	char why[PATH_MAX + 200], up[PATH_MAX];
	snprintf(up, sizeof(up), "%s", o->dir);
	int afd = vp_safe_opendir(up, VP_SAFE_TRUSTED_LINKS);
	while (afd == -ENOENT) {
		char *slash = strrchr(up, '/');
		if (!slash || slash == up)
			snprintf(up, sizeof(up), "%s", slash ? "/" : ".");
		else
			*slash = '\0';
		afd = vp_safe_opendir(up, VP_SAFE_TRUSTED_LINKS);
	}
	int pe = afd >= 0 ? vp_safe_check_parents(afd, why, sizeof(why)) : 0;
	if (afd >= 0 && !pe && strcmp(up, o->dir)) {
		/* DIR is to be made in up: up itself is then its parent. */
		struct stat ast;
		if (fstat(afd, &ast) == 0 && (ast.st_uid != 0 || (((ast.st_mode & 002) || ((ast.st_mode & 020) && ast.st_gid != 0)) &&
									!(ast.st_mode & S_ISVTX)))) {
			snprintf(why, sizeof(why), "%s (owner uid %u, mode %04o) is not root's alone", up,
				 (unsigned)ast.st_uid, (unsigned)(ast.st_mode & 07777));
			pe = -EPERM;
		}
	}
	if (afd >= 0)
		close(afd);
	if (pe == -EPERM) {
		vp_set_err(err, errlen, "--continuous %s: %s, so others could replace the directory the service writes "
			   "whole-VM profiles in; use a path whose every directory only root may change (e.g. "
			   "/var/lib/viprof)", o->dir, why);
		free(c->dir);
		free(c);
		errno = EPERM;
		return NULL;
	}
	c->dirfd = vp_safe_opendir(o->dir, VP_SAFE_CREATE | VP_SAFE_TRUSTED_LINKS);
	if (c->dirfd < 0) {
		int e = -c->dirfd;
		vp_set_err(err, errlen, "--continuous %s: cannot open or create the directory: %s%s", o->dir, strerror(e),
			   e == ELOOP ? " (a symbolic link on the way that root did not make)" : "");
		free(c->dir);
		free(c);
		errno = e;
		return NULL;
	}
	/* Root writes whole-VM profiles here and removes old intervals: a DIR that another
	 * user owns or may write into could have entries swapped under the service. */
	struct stat st;
	int se = fstat(c->dirfd, &st) != 0 ? errno : 0;
	int ce = se ? 0 : vp_safe_check_parents(c->dirfd, why, sizeof(why));
	if (ce == -EPERM || se || st.st_uid != 0 || (st.st_mode & 022)) {
		if (ce == -EPERM)
			vp_set_err(err, errlen, "--continuous %s: %s, so others could replace the directory the service "
				   "writes whole-VM profiles in; use a path whose every directory only root may change "
				   "(e.g. /var/lib/viprof)", o->dir, why);
		else if (se)
			vp_set_err(err, errlen, "--continuous %s: cannot stat the directory: %s", o->dir, strerror(se));
		else if (st.st_uid != 0)
			vp_set_err(err, errlen, "--continuous %s is owned by uid %u, not root: the service writes whole-VM "
				   "profiles there; use a directory only root owns (chown root %s, or a new path)", o->dir,
				   (unsigned)st.st_uid, o->dir);
		else
			vp_set_err(err, errlen, "--continuous %s is writable by %s (mode %04o): the service writes whole-VM "
				   "profiles there; chmod go-w %s, or use a new path (created 0700)", o->dir,
				   (st.st_mode & 002) ? "others" : "its group", (unsigned)(st.st_mode & 07777), o->dir);
		close(c->dirfd);
		free(c->dir);
		free(c);
		errno = se ? se : EPERM;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	/* Retention applies at start too: a service restarted after a long stop does not
	 * keep what is already past its limits. */
	vp_retention__apply(c->dirfd, time(NULL), o->interval_s, o->keep_age_s, o->keep_bytes, NULL, o->log);
	int e = pthread_create(&c->thread, NULL, cont_thread, c);
	if (e) {
		vp_set_err(err, errlen, "cannot start the continuous recording's thread: %s", strerror(e));
		close(c->dirfd);
		free(c->dir);
		free(c);
		errno = e;
		return NULL;
	}
	return c;
}

void vp_cont__status(struct vp_cont *c, char *current, size_t curlen, uint64_t *freq, char *lasterr, size_t errlen)
{
	pthread_mutex_lock(&c->lock);
	snprintf(current, curlen, "%s", c->current);
	*freq = c->freq;
	snprintf(lasterr, errlen, "%s", c->lasterr);
	pthread_mutex_unlock(&c->lock);
}

void vp_cont__on_ended(struct vp_cont *c, vp_cont_ended_fn fn, void *ctx)
{
	pthread_mutex_lock(&c->lock);
	c->ended = fn;
	c->ended_ctx = ctx;
	pthread_mutex_unlock(&c->lock);
}

int vp_cont__dirfd(const struct vp_cont *c)
{
	return c->dirfd;
}

void vp_cont__stop(struct vp_cont *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wake);
	close(c->dirfd);
	free(c->dir);
	free(c);
}
