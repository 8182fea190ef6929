/* A fleet report's data: aggregated in ClickHouse, then added to a profile that the
 * report pipeline writes like any loaded session (see fleet.h). */
#define _GNU_SOURCE
#include "fleet/fleet.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "fleet/sbuf.h"

/* A value as a SQL string literal; with like, '*' becomes LIKE's '%' and LIKE's own
 * wildcards are taken literally. */
static void sql_lit(struct vp_sbuf *b, const char *s, size_t n, bool like)
{
	vp_sbuf__put(b, "'", 1);
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (like && c == '*') {
			vp_sbuf__put(b, "%", 1);
		} else if (like && (c == '%' || c == '_')) {
			vp_sbuf__put(b, "\\\\", 2);
			vp_sbuf__put(b, &c, 1);
		} else if (c == '\\' || c == '\'') {
			vp_sbuf__put(b, "\\", 1);
			vp_sbuf__put(b, &c, 1);
		} else {
			vp_sbuf__put(b, &c, 1);
		}
	}
	vp_sbuf__put(b, "'", 1);
}

static const char *const where_keys[][2] = {
	{ "service", "service" }, { "host", "host" }, { "container", "container" },
	{ "thread", "thread" }, { "event", "event" }, { "interval", "interval_id" },
};

/* --where 'k=v,k=v': the same key twice is either value; different keys all hold. */
static int where_sql(struct vp_sbuf *b, const char *where, char *err, size_t errlen)
{
	size_t nk = sizeof(where_keys) / sizeof(where_keys[0]);
	for (size_t k = 0; k < nk; k++) {
		bool any = false;
		for (const char *c = where; c && *c;) {
			size_t len = strcspn(c, ",");
			const char *eq = memchr(c, '=', len);
			if (!eq) {
				vp_set_err(err, errlen, "--where '%s': expected KEY=VALUE[,KEY=VALUE..] (keys: service, host, "
					   "container, thread, event, interval)", where);
				return -EINVAL;
			}
			size_t kl = (size_t)(eq - c);
			bool known = false;
			for (size_t j = 0; j < nk; j++)
				known |= strlen(where_keys[j][0]) == kl && !strncmp(c, where_keys[j][0], kl);
			if (!known) {
				vp_set_err(err, errlen, "--where: unknown key '%.*s': service, host, container, thread, event or "
					   "interval", (int)kl, c);
				return -EINVAL;
			}
			if (strlen(where_keys[k][0]) == kl && !strncmp(c, where_keys[k][0], kl)) {
				const char *v = eq + 1;
				size_t vl = len - kl - 1;
				vp_sbuf__put(b, any ? " OR " : " AND (", any ? 4 : 6);
				bool glob = memchr(v, '*', vl) != NULL;
				vp_sbuf__printf(b, "%s %s ", where_keys[k][1], glob ? "LIKE" : "=");
				sql_lit(b, v, vl, glob);
				any = true;
			}
			c += len + (c[len] == ',');
		}
		if (any)
			vp_sbuf__put(b, ")", 1);
	}
	return 0;
}

/* TabSeparated's escapes undone in place; returns the field and moves *cur to the next
 * one (NULL after the line's last). */
static char *field(char **cur)
{
	char *s = *cur, *o = s, *start = s;
	if (!s)
		return NULL;
	for (; *s && *s != '\t' && *s != '\n'; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			*o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s == '0' ? '\0' : *s;
		} else {
			*o++ = *s;
		}
	}
	*cur = *s == '\t' ? s + 1 : NULL;
	*o = '\0';
	return start;
}

/* A field as it is, escapes kept: an array's text, whose elements carry their own
 * (ClickHouse writes an array into TabSeparated without escaping it again). */
static char *field_raw(char **cur)
{
	char *s = *cur;
	if (!s)
		return NULL;
	size_t n = strcspn(s, "\t\n");
	*cur = s[n] == '\t' ? s + n + 1 : NULL;
	s[n] = '\0';
	return s;
}

/* The next element of an array's text (its raw field, field_raw()):
 * ['a','b\'c'] or [1,2]. Returns it (NUL-terminated in place) or NULL at the end. */
static char *elem(char **cur)
{
	char *s = *cur;
	if (!s)
		return NULL;
	if (*s == '[')
		s++;
	if (*s == ',')
		s++;
	if (*s == ']' || !*s) {
		*cur = NULL;
		return NULL;
	}
	if (*s == '\'') {
		char *o = ++s, *start = s;
		for (; *s && *s != '\''; s++) {
			if (*s == '\\' && s[1]) {
				s++;
				*o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s == '0' ? '\0' : *s;
			} else {
				*o++ = *s;
			}
		}
		*cur = *s ? s + 1 : s;
		*o = '\0';
		return start;
	}
	/* A number: ends at ',' (cut there) or at ']' (the array's end, for the next call). */
	static char done[] = "]";
	char *start = s;
	s += strcspn(s, ",]");
	*cur = *s == ',' ? s + 1 : done;
	*s = '\0';
	return start;
}

struct agg {
	uint64_t hash;
	char *thread, *event, *unit;
	uint64_t samples, weight;
	unsigned order;                /* the event's first place in the intervals' profiles */
	uint32_t stack;                /* its index in the profile, once added */
};

static int cmp_agg_key(const void *a, const void *b)
{
	const struct agg *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	int c = strcmp(x->thread, y->thread);
	return c ? c : strcmp(x->event, y->event);
}

static int cmp_order(const void *a, const void *b)
{
	const struct agg *x = *(const struct agg *const *)a, *y = *(const struct agg *const *)b;
	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	return strcmp(x->event, y->event);
}

struct stk {
	uint64_t hash;
	uint32_t *frames;
	uint32_t n;
};

static int cmp_stk(const void *a, const void *b)
{
	uint64_t x = ((const struct stk *)a)->hash, y = ((const struct stk *)b)->hash;
	return x < y ? -1 : x > y;
}

/* What the load gathered: the samples' rows by stack, thread and event, and the
 * stacks they name (sorted by hash once all are read). */
struct rows {
	struct agg *aggs;
	struct stk *stks;
	size_t naggs, acap, nstks, scap;
};

/* The samples' query into q, grouped by stack, thread and event; *where_end is where its
 * SELECT and WHERE end, for the times' query. */
static int samples_sql(struct vp_sbuf *q, size_t *where_end, const struct vp_fleet_url *u,
		       const struct vp_fleet_filter *f, char *err, size_t errlen)
{
	int e;
	struct vp_sbuf w = { 0 };
	vp_sbuf__put(&w, "WHERE 1", 7);
	if ((e = where_sql(&w, f->where, err, errlen))) {
		free(w.p);
		return e;
	}
	/* FINAL: rows of an interval sent twice are one before their parts merge. */
	vp_sbuf__printf(q, "SELECT stack_hash, thread, event, any(unit), sum(samples), sum(weight), min(event_idx) FROM %s.%ssamples FINAL ",
		   u->db, u->prefix);
	vp_sbuf__put(q, w.p ? w.p : "", w.n);
	free(w.p);
	if (f->t_from > 0)
		vp_sbuf__printf(q, " AND ts >= toDateTime(%llu)", (unsigned long long)f->t_from);
	if (f->t_to > 0)
		vp_sbuf__printf(q, " AND ts < toDateTime(%llu)", (unsigned long long)(f->t_to + 0.999999));
	if (f->container) {
		vp_sbuf__put(q, " AND startsWith(container, ", 26);
		sql_lit(q, f->container, strlen(f->container), false);
		vp_sbuf__put(q, ")", 1);
	}
	if (f->thread) {
		vp_sbuf__put(q, " AND thread = ", 14);
		sql_lit(q, f->thread, strlen(f->thread), false);
	}
	*where_end = q->n;   /* the SELECT and its WHERE, again for the times */
	vp_sbuf__put(q, " GROUP BY stack_hash, thread, event FORMAT TabSeparated", 55);
	return q->err;
}

/* The same rows by second: "SELECT stack_hash, thread, event, toUInt32(ts), sum(samples) FROM ..". */
static int query_times(const struct vp_fleet_url *u, const struct vp_sbuf *q, size_t where_end, char **tans, char *err,
		       size_t errlen)
{
	static const char head[] = "SELECT stack_hash, thread, event, any(unit), sum(samples), sum(weight), min(event_idx)";
	struct vp_sbuf t = { 0 };
	vp_sbuf__put(&t, "SELECT stack_hash, thread, event, toUInt32(ts), sum(samples)", 60);
	vp_sbuf__put(&t, q->p + sizeof(head) - 1, where_end - (sizeof(head) - 1));
	vp_sbuf__put(&t, " GROUP BY stack_hash, thread, event, ts ORDER BY ts FORMAT TabSeparated", 71);
	int e = t.err ? t.err : vp_fleet__query(u, t.p, NULL, 0, tans, err, errlen);
	free(t.p);
	return e;
}

/* The samples' answer (cut in place) into r->aggs. */
static int parse_aggs(struct rows *r, char *ans)
{
	for (char *line = ans; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *cur = line, *h = field(&cur), *th = field(&cur), *ev = field(&cur), *un = field(&cur),
		     *sm = field(&cur), *wt = field(&cur), *ei = field(&cur);
		if (h && th && ev && un && sm && wt && ei) {
			if (vp_grow((void **)&r->aggs, &r->acap, r->naggs + 1, sizeof(*r->aggs)))
				return -ENOMEM;
			r->aggs[r->naggs++] = (struct agg){ .hash = strtoull(h, NULL, 10), .thread = th, .event = ev,
							    .unit = un, .samples = strtoull(sm, NULL, 10),
							    .weight = strtoull(wt, NULL, 10),
							    .order = (unsigned)strtoul(ei, NULL, 10) };
		}
		line = next;
	}
	return 0;
}

/* The stacks' answer (cut in place) into r->stks, their frames interned in p. */
static int parse_stacks(struct rows *r, char *ans2, struct vp_profile *p)
{
	uint32_t *fr = NULL;
	size_t frcap = 0;
	int e = -ENOMEM;
	for (char *line = ans2; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *cur = line, *h = field_raw(&cur), *names = field_raw(&cur), *images = field_raw(&cur),
		     *layers = field_raw(&cur), *tiers = field_raw(&cur);
		line = next;
		if (!h || !names || !images || !layers || !tiers)
			continue;
		uint32_t n = 0;
		char *cn = names, *ci = images, *cl = layers, *ct = tiers, *name;
		while ((name = elem(&cn))) {
			char *img = elem(&ci), *ly = elem(&cl), *ti = elem(&ct);
			struct vp_frame fm = { .name = name, .image = img ? img : "", .build_id = "", .file = "",
					       .layer = (uint8_t)strtoul(ly ? ly : "7", NULL, 10),
					       .tier = (uint8_t)strtoul(ti ? ti : "0", NULL, 10) };
			uint32_t id = vp_profile__frame(p, &fm);
			if (id == UINT32_MAX || vp_grow((void **)&fr, &frcap, n + 1, sizeof(*fr)))
				goto cleanup;
			fr[n++] = id;
		}
		if (vp_grow((void **)&r->stks, &r->scap, r->nstks + 1, sizeof(*r->stks)))
			goto cleanup;
		struct stk *st = &r->stks[r->nstks];
		st->hash = strtoull(h, NULL, 10);
		st->n = n;
		st->frames = n ? malloc(n * sizeof(*fr)) : NULL;
		if (n && !st->frames)
			goto cleanup;
		if (n)
			memcpy(st->frames, fr, n * sizeof(*fr));
		r->nstks++;
	}
	e = 0;
cleanup:
	free(fr);
	return e;
}

/* Events in the order the intervals had them (the recorded event first, then steal,
 * off-cpu, ...): reports draw the first by default, as from the directories. */
static int add_events(struct vp_profile *p, struct agg *aggs, size_t naggs)
{
	struct agg **byev = malloc(naggs * sizeof(*byev));
	if (!byev)
		return -ENOMEM;
	for (size_t i = 0; i < naggs; i++)
		byev[i] = &aggs[i];
	vp_sort(byev, naggs, sizeof(*byev), cmp_order);
	for (size_t i = 0; i < naggs; i++)
		if (vp_profile__add_event(p, byev[i]->event, byev[i]->unit) < 0) {
			free(byev);
			return -ENOMEM;
		}
	free(byev);
	return 0;
}

/* Each row's stack into p; *missing counts the rows whose stack was not found. */
static int add_stacks(struct vp_profile *p, struct rows *r, size_t *missing)
{
	int e;
	for (size_t i = 0; i < r->naggs; i++) {
		struct agg *a = &r->aggs[i];
		struct stk key = { .hash = a->hash };
		const struct stk *s = bsearch(&key, r->stks, r->nstks, sizeof(*r->stks), cmp_stk);
		if (!s) {
			(*missing)++;
			continue;
		}
		int ev = vp_profile__add_event(p, a->event, a->unit);
		a->stack = UINT32_MAX;
		if (ev < 0 || (e = vp_profile__add_stack(p, s->frames, s->n, 0, 0, a->thread, ev, a->samples, a->weight,
							 &a->stack)) < 0)
			return ev < 0 ? ev : e;
	}
	return 0;
}

/* Each second's samples at their offset from the first row's second. */
static int add_times(struct vp_profile *p, struct rows *r, char *tans)
{
	int e;
	vp_sort(r->aggs, r->naggs, sizeof(*r->aggs), cmp_agg_key);
	long long t0 = -1;
	for (char *line = tans; *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *cur = line, *h = field(&cur), *th = field(&cur), *ev = field(&cur), *ts = field(&cur),
		     *sm = field(&cur);
		line = next ? next : line + strlen(line);
		if (!h || !th || !ev || !ts || !sm)
			continue;
		struct agg key = { .hash = strtoull(h, NULL, 10), .thread = th, .event = ev };
		const struct agg *a = bsearch(&key, r->aggs, r->naggs, sizeof(*r->aggs), cmp_agg_key);
		int evi = -1;
		for (int k = 0; k < p->nevents; k++)
			if (!strcmp(p->events[k].name, ev))
				evi = k;
		if (!a || a->stack == UINT32_MAX || evi < 0)
			continue;
		long long sec = strtoll(ts, NULL, 10);
		if (t0 < 0)
			t0 = sec;
		if ((e = vp_profile__add_time(p, a->stack, evi, (uint64_t)(sec - t0) * 1000000000ull,
					      strtoull(sm, NULL, 10))))
			return e;
	}
	return 0;
}

int vp_fleet__load(const struct vp_fleet_url *u, const struct vp_fleet_filter *f, struct vp_profile *p, char *err,
		   size_t errlen)
{
	struct vp_sbuf q = { 0 };
	char *ans = NULL, *ans2 = NULL, *tans = NULL;
	struct rows r = { 0 };
	size_t where_end = 0, missing = 0;
	int e;

	if ((e = samples_sql(&q, &where_end, u, f, err, errlen)))
		goto cleanup;
	if ((e = vp_fleet__query(u, q.p, NULL, 0, &ans, err, errlen)))
		goto cleanup;
	if (f->times && (e = query_times(u, &q, where_end, &tans, err, errlen)))
		goto cleanup;
	if ((e = parse_aggs(&r, ans)))
		goto cleanup;
	if (!r.naggs) {
		e = 0;
		goto cleanup;
	}
	/* The stacks of those hashes. */
	q.n = 0;
	vp_sbuf__printf(&q, "SELECT hash, names, images, layers, tiers FROM %s.%sstacks WHERE hash IN (", u->db, u->prefix);
	for (size_t i = 0; i < r.naggs; i++)
		vp_sbuf__printf(&q, "%s%llu", i ? "," : "", (unsigned long long)r.aggs[i].hash);
	vp_sbuf__put(&q, ") FORMAT TabSeparated", 21);
	if (q.err) {
		e = q.err;
		goto cleanup;
	}
	if ((e = vp_fleet__query(u, q.p, NULL, 0, &ans2, err, errlen)))
		goto cleanup;
	if ((e = parse_stacks(&r, ans2, p)))
		goto cleanup;
	vp_sort(r.stks, r.nstks, sizeof(*r.stks), cmp_stk);
	if ((e = add_events(p, r.aggs, r.naggs)) || (e = add_stacks(p, &r, &missing)))
		goto cleanup;
	if (tans && (e = add_times(p, &r, tans)))
		goto cleanup;
	if (missing)
		vp_profile__warn(p, "%zu stack(s) of the samples are not in %s.%sstacks (an insert cut short?): left out",
				 missing, u->db, u->prefix);
	e = 0;
cleanup:
	for (size_t i = 0; i < r.nstks; i++)
		free(r.stks[i].frames);
	free(r.stks);
	free(r.aggs);
	free(ans);
	free(ans2);
	free(tans);
	free(q.p);
	return e;
}
