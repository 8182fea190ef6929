/* Views of a profile (profile_xform.h): the source profile is copied stack by stack into
 * a new one, frames renamed and re-interned (so that two lambdas that differ only by
 * their per-run address become one frame), stacks filtered and cut. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strtab.h"
#include "common/util.h"
#include "postproc/calltree.h"
#include "postproc/profile_xform.h"

#define NONE VP_CALLTREE_NONE

bool vp_xform__active(const struct vp_xform *x)
{
	return x && (x->norm || x->simple || x->java_only || x->merge_tiers || x->ninclude || x->nexclude ||
		     x->minwidth > 0);
}

static bool is_java_layer(int layer)
{
	return layer == VP_LAYER_JIT || layer == VP_LAYER_INLINED || layer == VP_LAYER_INTERPRETED;
}

static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

/* Appends n bytes of s to out (room for the NUL kept). */
static void put(char *out, size_t outlen, size_t *o, const char *s, size_t n)
{
	for (size_t k = 0; k < n; k++, (*o)++)
		if (*o + 1 < outlen)
			out[*o] = s[k];
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

size_t vp_name__norm(const char *name, char *out, size_t outlen)
{
	/* Names whose trailing number is a per-run counter: HotSpot numbers lambda proxies,
	 * reflection accessors and dynamic proxies in the order a run happens to create them. */
	static const char *const counted[] = {
		"$$Lambda", "$Proxy", "GeneratedMethodAccessor", "GeneratedConstructorAccessor",
		"GeneratedSerializationConstructorAccessor",
	};
	size_t o = 0, i = 0;
	while (name[i]) {
		bool done = false;
		for (size_t c = 0; c < sizeof(counted) / sizeof(counted[0]) && !done; c++) {
			if (!starts(name + i, counted[c]))
				continue;
			size_t l = strlen(counted[c]);
			put(out, outlen, &o, name + i, l);
			i += l;
			/* "$$Lambda$12" (JDK <= 20) and "$Proxy12", "Accessor12". */
			size_t j = i + (name[i] == '$' && c == 0);
			if (isdigit((unsigned char)name[j])) {
				while (isdigit((unsigned char)name[j]))
					j++;
				i = j;
			}
			done = true;
		}
		if (done)
			continue;
		/* A hidden class's address, "/0x7f.." in the JVM's name and ".0x7f.." once the
		 * agent has turned slashes into dots: no Java identifier starts with a digit,
		 * so ".0x" followed by hex and then a separator is always such an address. */
		if (i > 0 && (name[i] == '.' || name[i] == '/') && name[i + 1] == '0' && name[i + 2] == 'x' &&
		    isxdigit((unsigned char)name[i + 3])) {
			size_t j = i + 3;
			while (isxdigit((unsigned char)name[j]))
				j++;
			if (!ident_char(name[j])) {
				i = j;
				continue;
			}
		}
		put(out, outlen, &o, name + i, 1);
		i++;
	}
	if (outlen)
		out[o < outlen ? o : outlen - 1] = '\0';
	return o;
}

size_t vp_name__simple(const char *name, char *out, size_t outlen)
{
	size_t end = strlen(name);
	const char *clone = strstr(name, " [clone ");
	if (clone)
		end = (size_t)(clone - name);
	while (end > 0 && name[end - 1] == ' ')
		end--;
	if (end >= 6 && !strncmp(name + end - 6, " const", 6))
		end -= 6;
	if (end > 0 && name[end - 1] == ')') {
		/* The argument list is the last balanced (...) group: "operator()(int)" keeps
		 * "operator()", "(anonymous namespace)::f(int)" keeps its namespace. */
		int depth = 0;
		size_t k = end;
		while (k > 0) {
			char c = name[--k];
			if (c == ')')
				depth++;
			else if (c == '(' && --depth == 0)
				break;
		}
		if (depth == 0 && k > 0)
			end = k;
	}
	size_t o = 0;
	put(out, outlen, &o, name, end);
	if (outlen)
		out[o < outlen ? o : outlen - 1] = '\0';
	return o;
}

/* The call tree for --minwidth (postproc/calltree.h), with each node's total of one
 * event. Under node 0, a root per thread name when the tree has a thread level (folded
 * output), else one. */
struct mw_tree {
	struct vp_calltree ct;
	struct vp_strtab comms;
	uint64_t *total;
	size_t cap;
};

/* The node of frame under parent, made if new; NONE on ENOMEM. */
static uint32_t mw_node(struct mw_tree *t, uint32_t parent, uint32_t frame)
{
	size_t len = t->ct.len;
	uint32_t id = vp_calltree__child(&t->ct, parent, frame);
	if (id == NONE || id < len)
		return id;   /* there already */
	if (vp_grow((void **)&t->total, &t->cap, t->ct.len, sizeof(*t->total)))
		return NONE;
	t->total[id] = 0;
	return id;
}

/* A stack's root: its thread name's node when the tree has a thread level. */
static uint32_t mw_root(struct mw_tree *t, const struct vp_xform *x, const char *comm)
{
	if (!t->ct.len && vp_calltree__add(&t->ct, NONE, 0) == NONE)
		return NONE;
	int64_t id = x->minwidth_by_thread ? vp_strtab__id(&t->comms, comm) : 0;
	return id < 0 ? NONE : mw_node(t, 0, (uint32_t)id);
}

/* Walks the stack's frames [start, start + len) (mapped through fmap) down the tree,
 * adding add to each node's total; with add 0, stops at the first node whose total is
 * under min. Returns how many frames it walked, NONE on ENOMEM. */
static uint32_t mw_walk(struct mw_tree *t, const struct vp_xform *x, const struct vp_stack *s, const uint32_t *fmap,
			uint32_t start, uint32_t len, uint64_t add, double min)
{
	uint32_t parent = mw_root(t, x, s->comm);
	if (parent == NONE)
		return NONE;
	for (uint32_t k = 0; k < len; k++) {
		uint32_t nd = mw_node(t, parent, fmap[s->frames[start + k]]);
		if (nd == NONE)
			return NONE;
		if (add)
			t->total[nd] += add;
		else if ((double)t->total[nd] < min)
			return k;
		parent = nd;
	}
	return len;
}

static void mw_free(struct mw_tree *t)
{
	vp_calltree__free(&t->ct);
	vp_strtab__free(&t->comms);
	free(t->total);
}

static int compile_all(regex_t *re, const char *const *src, int n, const char *opt, int *ncompiled, char *err,
		       size_t errlen)
{
	for (int i = 0; i < n; i++) {
		int rc = regcomp(&re[i], src[i], REG_EXTENDED | REG_NOSUB);
		if (rc) {
			char why[200];
			regerror(rc, &re[i], why, sizeof(why));
			snprintf(err, errlen, "--%s '%s': not a regular expression (%s); write a POSIX extended regex, e.g. --%s 'java\\.util\\..*'",
				 opt, src[i], why, opt);
			return -EINVAL;
		}
		(*ncompiled)++;
	}
	return 0;
}

/* One transform's state, from the source profile to the view being built. */
struct xf {
	const struct vp_profile *src;
	const struct vp_xform *x;
	struct vp_profile *dst;
	regex_t inc[VP_XFORM_MAX_RE], exc[VP_XFORM_MAX_RE];
	int ninc, nexc, evmap[8];
	uint32_t *fmap;    /* per source frame: its frame in dst */
	uint8_t *match;    /* per source frame: 1 include matched, 2 exclude matched */
	uint32_t *smap, *start, *len;   /* per source stack: dst stack, first frame kept, frames kept or NONE */
	struct mw_tree mw;
};

/* A frame's name as the view shows it, into *name (grown to twice the name's size, the
 * second half scratch). Returns it, NULL on ENOMEM. */
static char *view_name(const struct vp_xform *x, const struct vp_frame *f, char **name, size_t *namecap)
{
	size_t need = strlen(f->name) + 1;
	if (vp_grow((void **)name, namecap, 2 * need, 1))
		return NULL;
	char *a = *name, *b = *name + need;
	memcpy(a, f->name, need);
	if (x->norm && is_java_layer(f->layer)) {
		vp_name__norm(a, b, need);
		memcpy(a, b, need);
	}
	if (x->simple) {
		vp_name__simple(a, b, need);
		memcpy(a, b, need);
	}
	return a;
}

/* Frames: renamed, re-interned into dst, and matched once each rather than once per
 * stack. Fills t->fmap and t->match. */
static int xf_frames(struct xf *t)
{
	const struct vp_profile *src = t->src;
	const struct vp_xform *x = t->x;
	int ret = -ENOMEM;
	char *name = NULL;
	size_t namecap = 0;
	/* --merge-tiers: each frame's group (a Java method by name), each frame's samples,
	 * and each group's samples by layer (JIT, inlined, interpreted). */
	struct vp_strtab groups = { 0 };
	uint32_t *group = NULL;
	uint64_t *fw = NULL;
	struct { uint64_t w[3]; } *gw = NULL;
	size_t gwcap = 0, ngroups = 0;

	t->fmap = malloc((src->nframes + 1) * sizeof(*t->fmap));
	t->match = calloc(src->nframes + 1, 1);
	if (!t->fmap || !t->match)
		goto cleanup;
	/* --merge-tiers: each Java method's frames in one group by name, and the layer
	 * that had most of its samples (a method run mostly interpreted stays
	 * interpreted). */
	if (x->merge_tiers) {
		group = malloc((src->nframes + 1) * sizeof(*group));
		fw = calloc(src->nframes + 1, sizeof(*fw));
		if (!group || !fw)
			goto cleanup;
		for (size_t i = 0; i < src->nstacks; i++) {
			const struct vp_stack *s = &src->stacks[i];
			uint64_t n = 0;
			for (int e = 0; e < src->nevents; e++)
				n += s->samples[e];
			for (uint32_t k = 0; k < s->nframes; k++)
				fw[s->frames[k]] += n;
		}
	}
	for (int pass = x->merge_tiers ? 0 : 1; pass < 2; pass++)
	for (size_t i = 0; i < src->nframes; i++) {
		struct vp_frame f = src->frames[i];
		char *a = view_name(x, &f, &name, &namecap);
		if (!a)
			goto cleanup;
		f.name = a;
		/* A method's C1 and C2 code are one frame for comparison: which tier ran when
		 * differs from run to run with the JIT's timing. */
		if (x->norm)
			f.tier = 0;
		/* Placeholders ("[interpreted]") name no method: they stay apart. */
		bool merged = x->merge_tiers && is_java_layer(f.layer) && a[0] != '[';
		if (merged && pass == 0) {
			int64_t g = vp_strtab__id_copy(&groups, a);
			if (g < 0 || vp_grow((void **)&gw, &gwcap, (size_t)g + 1, sizeof(*gw)))
				goto cleanup;
			if ((size_t)g >= ngroups) {
				memset(&gw[ngroups], 0, ((size_t)g + 1 - ngroups) * sizeof(*gw));
				ngroups = (size_t)g + 1;
			}
			group[i] = (uint32_t)g;
			gw[g].w[f.layer - VP_LAYER_JIT] += fw[i];
			continue;
		}
		if (pass == 0)
			continue;
		if (merged) {
			/* JIT, then inlined, then interpreted on a tie: the order of the layers. */
			const uint64_t *w = gw[group[i]].w;
			int best = 0;
			for (int l = 1; l < 3; l++)
				if (w[l] > w[best])
					best = l;
			f.layer = (uint8_t)(VP_LAYER_JIT + best);
			f.tier = 0;
			f.image = "[jit]";
		}
		if ((t->fmap[i] = vp_profile__frame(t->dst, &f)) == NONE)
			goto cleanup;
		for (int r = 0; r < t->ninc && !(t->match[i] & 1); r++)
			if (!regexec(&t->inc[r], a, 0, NULL, 0))
				t->match[i] |= 1;
		for (int r = 0; r < t->nexc && !(t->match[i] & 2); r++)
			if (!regexec(&t->exc[r], a, 0, NULL, 0))
				t->match[i] |= 2;
	}
	ret = 0;
cleanup:
	vp_strtab__free(&groups);
	free(group);
	free(fw);
	free(gw);
	free(name);
	return ret;
}

/* Stacks: which are kept (--include, --exclude), and where each starts (--java-only). */
static int xf_select(struct xf *t)
{
	const struct vp_profile *src = t->src;
	size_t ns = src->nstacks;
	t->smap = malloc((ns + 1) * sizeof(*t->smap));
	t->start = calloc(ns + 1, sizeof(*t->start));
	t->len = calloc(ns + 1, sizeof(*t->len));
	if (!t->smap || !t->start || !t->len)
		return -ENOMEM;
	for (size_t i = 0; i < ns; i++) {
		const struct vp_stack *s = &src->stacks[i];
		bool any_inc = false, any_exc = false;
		t->smap[i] = NONE;
		for (uint32_t k = 0; k < s->nframes; k++) {
			any_inc |= t->match[s->frames[k]] & 1;
			any_exc |= (t->match[s->frames[k]] & 2) != 0;
		}
		if ((t->ninc && !any_inc) || any_exc) {
			t->len[i] = NONE;   /* dropped */
			continue;
		}
		t->len[i] = s->nframes;
		if (t->x->java_only) {
			/* Stacks with no Java frame at all (GC, compiler threads) stay whole, so
			 * that the view's total is the profile's and their cost stays in sight. */
			for (uint32_t k = 0; k < s->nframes; k++)
				if (is_java_layer(src->frames[s->frames[k]].layer)) {
					t->start[i] = k;
					t->len[i] = s->nframes - k;
					break;
				}
		}
	}
	return 0;
}

/* --minwidth: each stack cut at its first node narrower than the minimum. */
static int xf_minwidth(struct xf *t)
{
	const struct vp_profile *src = t->src;
	const struct vp_xform *x = t->x;
	size_t ns = src->nstacks;
	int ev = x->minwidth_event;
	uint64_t all = 0;
	for (size_t i = 0; i < ns; i++) {
		const struct vp_stack *s = &src->stacks[i];
		if (t->len[i] == NONE || !s->samples[ev])
			continue;
		all += s->samples[ev];
		if (mw_walk(&t->mw, x, s, t->fmap, t->start[i], t->len[i], s->samples[ev], 0) == NONE)
			return -ENOMEM;
	}
	double min = all * x->minwidth / 100.0;
	for (size_t i = 0; i < ns; i++)
		if (t->len[i] != NONE &&
		    (t->len[i] = mw_walk(&t->mw, x, &src->stacks[i], t->fmap, t->start[i], t->len[i], 0, min)) == NONE)
			return -ENOMEM;
	return 0;
}

/* The kept stacks, as cut, into dst. */
static int xf_add_stacks(struct xf *t)
{
	const struct vp_profile *src = t->src;
	uint32_t *buf = NULL;
	size_t bufcap = 0;
	int ret = -ENOMEM;
	for (size_t i = 0; i < src->nstacks; i++) {
		const struct vp_stack *s = &src->stacks[i];
		if (t->len[i] == NONE)
			continue;
		if (vp_grow((void **)&buf, &bufcap, t->len[i] + 1, sizeof(*buf))) {
			ret = -ENOMEM;
			goto cleanup;
		}
		for (uint32_t k = 0; k < t->len[i]; k++)
			buf[k] = t->fmap[s->frames[t->start[i] + k]];
		for (int e = 0; e < src->nevents; e++) {
			if (!s->samples[e] && !s->weight[e])
				continue;
			if ((ret = vp_profile__add_stack(t->dst, buf, t->len[i], s->pid, s->tid, s->comm, t->evmap[e],
							 s->samples[e], s->weight[e], &t->smap[i])))
				goto cleanup;
		}
	}
	ret = 0;
cleanup:
	free(buf);
	return ret;
}

/* What else the view keeps of the source: addresses, times, metadata, warnings. */
static int xf_copy_rest(struct xf *t)
{
	const struct vp_profile *src = t->src;
	const struct vp_xform *x = t->x;
	struct vp_profile *dst = t->dst;
	int ret;
	/* Addresses (pprof) only where the stacks keep all their frames: a cut stack's
	 * locations would still name the frames it lost; pprof then takes one location per
	 * frame instead. */
	if (!x->java_only && !(x->minwidth > 0) && (ret = vp_profile__merge_locs(dst, src, t->fmap, t->smap, t->evmap)))
		return ret;
	if ((ret = vp_profile__merge_times(dst, src, t->smap, t->evmap)))
		return ret;
	for (size_t i = 0; i < src->nthreads; i++)
		if ((ret = vp_profile__thread_times(dst, &src->threads[i])))
			return ret;
	for (size_t i = 0; i < src->nmeta; i++)
		vp_profile__set_meta(dst, src->meta[i].key, src->meta[i].value);
	for (const char *w = src->warnings; w && *w;) {
		size_t l = strcspn(w, "\n");
		vp_profile__warn(dst, "%.*s", (int)l, w);
		w += l + (w[l] == '\n');
	}
	dst->lost = src->lost;
	dst->incomplete = src->incomplete;
	return 0;
}

struct vp_profile *vp_profile__transform(const struct vp_profile *src, const struct vp_xform *x, char *err,
					 size_t errlen)
{
	struct xf t = { .src = src, .x = x };
	int ret = -ENOMEM;

	if (err && errlen)
		err[0] = '\0';
	if (x->ninclude > VP_XFORM_MAX_RE || x->nexclude > VP_XFORM_MAX_RE) {
		ret = -EINVAL;
		snprintf(err, errlen, "at most %d --include and %d --exclude patterns", VP_XFORM_MAX_RE, VP_XFORM_MAX_RE);
		goto cleanup;
	}
	if ((ret = compile_all(t.inc, x->include, x->ninclude, "include", &t.ninc, err, errlen)) ||
	    (ret = compile_all(t.exc, x->exclude, x->nexclude, "exclude", &t.nexc, err, errlen)))
		goto cleanup;
	ret = -ENOMEM;
	if (!(t.dst = vp_profile__new()))
		goto cleanup;
	for (int e = 0; e < src->nevents; e++)
		if ((t.evmap[e] = vp_profile__add_event(t.dst, src->events[e].name, src->events[e].unit)) < 0) {
			ret = t.evmap[e];
			goto cleanup;
		}
	if ((ret = xf_frames(&t)) || (ret = xf_select(&t)))
		goto cleanup;
	if (x->minwidth > 0 && x->minwidth_event >= 0 && x->minwidth_event < src->nevents &&
	    (ret = xf_minwidth(&t)))
		goto cleanup;
	if ((ret = xf_add_stacks(&t)) || (ret = xf_copy_rest(&t)))
		goto cleanup;
cleanup:
	for (int r = 0; r < t.ninc; r++)
		regfree(&t.inc[r]);
	for (int r = 0; r < t.nexc; r++)
		regfree(&t.exc[r]);
	mw_free(&t.mw);
	free(t.fmap);
	free(t.match);
	free(t.smap);
	free(t.start);
	free(t.len);
	if (ret) {
		vp_profile__free(t.dst);
		if (err && errlen && !err[0])
			snprintf(err, errlen, "%s", strerror(-ret));
		errno = -ret;
		return NULL;
	}
	return t.dst;
}
