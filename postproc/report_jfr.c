/* JDK Flight Recorder output (issue 25): one JFR chunk that JDK Mission Control, IntelliJ
 * IDEA and the JDK's own `jfr` tool read, holding the profile's samples of one event as
 * jdk.ExecutionSample events. Written from the chunk format as the JDK's parser reads it
 * (docs/java.md sums it up):
 *
 *   header   68 bytes, big-endian: "FLR\0", version 2.1, chunk size, offsets of the
 *            checkpoint and metadata events, start (wall ns), duration (ns), start ticks,
 *            ticks per second, features (1 = integers are varints, 2 = final chunk)
 *   events   each {size, type id, fields...}, size counting itself; integers are
 *            varints (7 bits a byte, low first; a 9th byte carries 8 bits), booleans one
 *            byte, strings an encoding byte (0 null, 1 empty, 3 UTF-8 with a length)
 *   metadata event type 0: a string table, then an element tree root > metadata > class
 *            (name, id, superType, simpleType) > field (name, class, constantPool,
 *            dimension) / annotation, and root > region
 *   checkpoint event type 1: delta to the previous checkpoint (0: none), a type byte,
 *            then constant pools {class id, count, {key, value}...}; a value is its
 *            class's fields in order, a constantPool field being the key of its pool entry
 *
 * The profile keeps counts per stack, not each sample's time, so the events' times are
 * spread evenly over the recording (each stack's samples interleaved with the others');
 * their number per stack, their threads and stacks are the profile's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "postproc/profile_xform.h"
#include "postproc/report.h"

/* Class ids: 0 and 1 are the metadata and checkpoint events. */
enum {
	T_EXECUTION_SAMPLE = 100, T_LONG, T_INT, T_BOOLEAN, T_STRING, T_THREAD, T_THREAD_GROUP, T_CLASS,
	T_CLASS_LOADER, T_METHOD, T_SYMBOL, T_PACKAGE, T_MODULE, T_STACK_TRACE, T_STACK_FRAME, T_FRAME_TYPE,
	T_THREAD_STATE, T_LABEL, T_TIMESTAMP,
};

enum { FT_INTERPRETED = 1, FT_JIT, FT_INLINED, FT_NATIVE };
static const char *const frame_types[] = { "", "Interpreted", "JIT compiled", "Inlined", "Native" };

/* A growable byte buffer whose error sticks, as vp_out's does. */
struct buf {
	uint8_t *b;
	size_t len, cap;
	int err;
};

static void b_put(struct buf *b, const void *p, size_t n)
{
	if (b->err)
		return;
	if (vp_grow((void **)&b->b, &b->cap, b->len + n, 1)) {
		b->err = -ENOMEM;
		return;
	}
	memcpy(b->b + b->len, p, n);
	b->len += n;
}

static void b_u8(struct buf *b, uint8_t v)
{
	b_put(b, &v, 1);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80 && n < 9) {
		v >>= 7;
		n++;
	}
	return n;
}

static void b_var(struct buf *b, uint64_t v)
{
	uint8_t t[9];
	size_t n = 0;
	while (n < 8 && v >= 0x80) {
		t[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	t[n++] = (uint8_t)v;   /* the 9th byte, when there is one, holds 8 bits */
	b_put(b, t, n);
}

static void b_be(struct buf *b, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		b_u8(b, (uint8_t)(v >> (8 * i)));
}

static void b_str(struct buf *b, const char *s)
{
	if (!s) {
		b_u8(b, 0);
		return;
	}
	size_t n = strlen(s);
	if (!n) {
		b_u8(b, 1);
		return;
	}
	b_u8(b, 3);
	b_var(b, n);
	b_put(b, s, n);
}

/* Appends body as one event: its size (counting the size's own bytes) first. */
static void b_event(struct buf *out, const struct buf *body)
{
	if (body->err) {
		out->err = out->err ? out->err : body->err;
		return;
	}
	size_t n = body->len + 1;
	while (varint_len(n) + body->len != n)
		n = body->len + varint_len(n);
	b_var(out, n);
	b_put(out, body->b, body->len);
}

/* Strings interned to ids 0..n-1 (the metadata's string table, the symbol pool). */
struct strtab {
	char **s;
	size_t n, cap;
	uint32_t *slot;
	size_t size;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* The id of s, added if new; UINT32_MAX on ENOMEM. */
static uint32_t st_id(struct strtab *t, const char *s)
{
	if ((t->n + 1) * 2 > t->size) {
		size_t size = t->size ? t->size * 2 : 1024;
		uint32_t *slot = malloc(size * sizeof(*slot));
		if (!slot)
			return UINT32_MAX;
		memset(slot, 0xff, size * sizeof(*slot));
		for (size_t i = 0; i < t->n; i++) {
			size_t j = str_hash(t->s[i]) & (size - 1);
			while (slot[j] != UINT32_MAX)
				j = (j + 1) & (size - 1);
			slot[j] = (uint32_t)i;
		}
		free(t->slot);
		t->slot = slot;
		t->size = size;
	}
	size_t j = str_hash(s) & (t->size - 1);
	for (; t->slot[j] != UINT32_MAX; j = (j + 1) & (t->size - 1))
		if (!strcmp(t->s[t->slot[j]], s))
			return t->slot[j];
	char *c = strdup(s);
	if (!c || vp_grow((void **)&t->s, &t->cap, t->n + 1, sizeof(*t->s))) {
		free(c);
		return UINT32_MAX;
	}
	t->s[t->n] = c;
	t->slot[j] = (uint32_t)t->n;
	return (uint32_t)t->n++;
}

static void st_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->slot);
}

/* The metadata, as a table: classes with their fields, in the JDK's field order (the
 * JDK's readers find fields by name, but tools such as JMC expect the usual set). */
struct mfield {
	const char *name;
	int type;
	bool cp;            /* a constant-pool reference */
	bool array;
	const char *label;
	bool ticks;         /* @Timestamp("TICKS") */
};
struct mclass {
	int id;
	const char *name, *super, *label;
	bool simple;
	struct mfield f[6];
};

static const struct mclass classes[] = {
	{ T_EXECUTION_SAMPLE, "jdk.ExecutionSample", "jdk.jfr.Event", "Method Profiling Sample", false, {
		{ "startTime", T_LONG, false, false, "Start Time", true },
		{ "sampledThread", T_THREAD, true, false, "Thread", false },
		{ "stackTrace", T_STACK_TRACE, true, false, "Stack Trace", false },
		{ "state", T_THREAD_STATE, true, false, "Thread State", false } } },
	{ T_LONG, "long", NULL, NULL, false, { { 0 } } },
	{ T_INT, "int", NULL, NULL, false, { { 0 } } },
	{ T_BOOLEAN, "boolean", NULL, NULL, false, { { 0 } } },
	{ T_STRING, "java.lang.String", NULL, NULL, false, { { 0 } } },
	{ T_THREAD, "java.lang.Thread", NULL, "Thread", false, {
		{ "osName", T_STRING, false, false, "OS Thread Name", false },
		{ "osThreadId", T_LONG, false, false, "OS Thread Id", false },
		{ "javaName", T_STRING, false, false, "Java Thread Name", false },
		{ "javaThreadId", T_LONG, false, false, "Java Thread Id", false },
		{ "group", T_THREAD_GROUP, true, false, "Java Thread Group", false } } },
	{ T_THREAD_GROUP, "jdk.types.ThreadGroup", NULL, "Thread Group", false, {
		{ "parent", T_THREAD_GROUP, true, false, "Parent", false },
		{ "name", T_STRING, false, false, "Name", false } } },
	{ T_CLASS, "java.lang.Class", NULL, "Java Class", false, {
		{ "classLoader", T_CLASS_LOADER, true, false, "Class Loader", false },
		{ "name", T_SYMBOL, true, false, "Name", false },
		{ "package", T_PACKAGE, true, false, "Package", false },
		{ "modifiers", T_INT, false, false, "Access Modifiers", false },
		{ "hidden", T_BOOLEAN, false, false, "Hidden", false } } },
	{ T_CLASS_LOADER, "jdk.types.ClassLoader", NULL, "Java Class Loader", false, {
		{ "type", T_CLASS, true, false, "Type", false },
		{ "name", T_SYMBOL, true, false, "Name", false } } },
	{ T_METHOD, "jdk.types.Method", NULL, "Java Method", false, {
		{ "type", T_CLASS, true, false, "Type", false },
		{ "name", T_SYMBOL, true, false, "Name", false },
		{ "descriptor", T_SYMBOL, true, false, "Descriptor", false },
		{ "modifiers", T_INT, false, false, "Access Modifiers", false },
		{ "hidden", T_BOOLEAN, false, false, "Hidden", false } } },
	{ T_SYMBOL, "jdk.types.Symbol", NULL, "Symbol", true, {
		{ "string", T_STRING, false, false, "String", false } } },
	{ T_PACKAGE, "jdk.types.Package", NULL, "Package", false, {
		{ "name", T_SYMBOL, true, false, "Name", false },
		{ "module", T_MODULE, true, false, "Module", false },
		{ "exported", T_BOOLEAN, false, false, "Exported", false } } },
	{ T_MODULE, "jdk.types.Module", NULL, "Module", false, {
		{ "name", T_SYMBOL, true, false, "Name", false },
		{ "version", T_SYMBOL, true, false, "Version", false },
		{ "location", T_SYMBOL, true, false, "Location", false },
		{ "classLoader", T_CLASS_LOADER, true, false, "Class Loader", false } } },
	{ T_STACK_TRACE, "jdk.types.StackTrace", NULL, "Stacktrace", false, {
		{ "truncated", T_BOOLEAN, false, false, "Truncated", false },
		{ "frames", T_STACK_FRAME, false, true, "Stack Frames", false } } },
	{ T_STACK_FRAME, "jdk.types.StackFrame", NULL, NULL, false, {
		{ "method", T_METHOD, true, false, "Java Method", false },
		{ "lineNumber", T_INT, false, false, "Line Number", false },
		{ "bytecodeIndex", T_INT, false, false, "Bytecode Index", false },
		{ "type", T_FRAME_TYPE, true, false, "Frame Type", false } } },
	{ T_FRAME_TYPE, "jdk.types.FrameType", NULL, "Frame type", true, {
		{ "description", T_STRING, false, false, "Description", false } } },
	{ T_THREAD_STATE, "jdk.types.ThreadState", NULL, "Thread State", true, {
		{ "name", T_STRING, false, false, "Name", false } } },
	{ T_LABEL, "jdk.jfr.Label", "java.lang.annotation.Annotation", NULL, false, {
		{ "value", T_STRING, false, false, NULL, false } } },
	{ T_TIMESTAMP, "jdk.jfr.Timestamp", "java.lang.annotation.Annotation", NULL, false, {
		{ "value", T_STRING, false, false, NULL, false } } },
};

/* One element of the metadata tree: name, attributes (string ids), then children written
 * by the caller right after (nchildren counts them). */
static void el(struct buf *b, struct strtab *s, const char *name, int nattr, const char *const *attr, uint32_t nchildren)
{
	b_var(b, st_id(s, name));
	b_var(b, (uint64_t)nattr);
	for (int i = 0; i < 2 * nattr; i++)
		b_var(b, st_id(s, attr[i]));
	b_var(b, nchildren);
}

static void annotation(struct buf *b, struct strtab *s, int cls, const char *value)
{
	char id[16];
	snprintf(id, sizeof(id), "%d", cls);
	const char *a[] = { "class", id, "value", value };
	el(b, s, "annotation", 2, a, 0);
}

/* The metadata event's body after its header fields: the string table, then the tree. */
static void metadata_tree(struct buf *out, struct strtab *s)
{
	struct buf t = { 0 };
	size_t nc = sizeof(classes) / sizeof(classes[0]);
	el(&t, s, "root", 0, NULL, 2);
	el(&t, s, "metadata", 0, NULL, (uint32_t)nc);
	for (size_t i = 0; i < nc; i++) {
		const struct mclass *c = &classes[i];
		char id[16];
		snprintf(id, sizeof(id), "%d", c->id);
		const char *a[8] = { "name", c->name, "id", id };
		int na = 2;
		if (c->super) {
			a[2 * na] = "superType";
			a[2 * na + 1] = c->super;
			na++;
		}
		if (c->simple) {
			a[2 * na] = "simpleType";
			a[2 * na + 1] = "true";
			na++;
		}
		uint32_t nf = 0;
		while (nf < 6 && c->f[nf].name)
			nf++;
		el(&t, s, "class", na, a, nf + (c->label ? 1 : 0));
		for (uint32_t k = 0; k < nf; k++) {
			const struct mfield *f = &c->f[k];
			char ty[16];
			snprintf(ty, sizeof(ty), "%d", f->type);
			const char *fa[8] = { "name", f->name, "class", ty };
			int nfa = 2;
			if (f->cp) {
				fa[2 * nfa] = "constantPool";
				fa[2 * nfa + 1] = "true";
				nfa++;
			}
			if (f->array) {
				fa[2 * nfa] = "dimension";
				fa[2 * nfa + 1] = "1";
				nfa++;
			}
			el(&t, s, "field", nfa, fa, (f->label ? 1u : 0u) + (f->ticks ? 1u : 0u));
			if (f->label)
				annotation(&t, s, T_LABEL, f->label);
			if (f->ticks)
				annotation(&t, s, T_TIMESTAMP, "TICKS");
		}
		if (c->label)
			annotation(&t, s, T_LABEL, c->label);
	}
	const char *region[] = { "locale", "en_US", "gmtOffset", "0" };
	el(&t, s, "region", 2, region, 0);
	/* The string table comes first, so it is written once the tree has named them all. */
	b_var(out, s->n);
	for (size_t i = 0; i < s->n; i++)
		b_str(out, s->s[i]);
	b_put(out, t.b, t.len);
	if (t.err && !out->err)
		out->err = t.err;
	free(t.b);
}

/* A Java frame's name split as JFR wants it: "a.b.C.m(int, String[])" -> class
 * "a/b/C", method "m", descriptor "(I[LString;)V" (the profile does not know the return
 * type; readers print the parameters only). False for names that are not Java methods. */
static bool split_java(const char *name, char *cls, size_t cl, char *meth, size_t ml, char *desc, size_t dl)
{
	const char *paren = strchr(name, '(');
	const char *end = paren ? paren : name + strlen(name);
	const char *dot = NULL;
	for (const char *p = name; p < end; p++)
		if (*p == '.')
			dot = p;
	if (!dot || dot == name)
		return false;
	snprintf(cls, cl, "%.*s", (int)(dot - name), name);
	for (char *c = cls; *c; c++)
		if (*c == '.')
			*c = '/';
	snprintf(meth, ml, "%.*s", (int)(end - dot - 1), dot + 1);
	size_t o = 0;
#define PUTC(ch) do { if (o + 1 < dl) desc[o++] = (ch); } while (0)
	PUTC('(');
	if (paren) {
		const char *p = paren + 1, *close = strrchr(paren, ')');
		if (!close)
			close = p + strlen(p);
		while (p < close) {
			while (*p == ' ' || *p == ',')
				p++;
			const char *q = p;
			while (q < close && *q != ',')
				q++;
			const char *e = q;
			while (e > p && e[-1] == ' ')
				e--;
			int dims = 0;
			while (e - p >= 2 && e[-2] == '[' && e[-1] == ']') {
				e -= 2;
				dims++;
			}
			if (e > p) {
				static const struct { const char *n; char c; } prim[] = {
					{ "boolean", 'Z' }, { "byte", 'B' }, { "char", 'C' }, { "short", 'S' },
					{ "int", 'I' }, { "long", 'J' }, { "float", 'F' }, { "double", 'D' },
				};
				for (int d = 0; d < dims; d++)
					PUTC('[');
				char pc = 0;
				for (size_t k = 0; k < sizeof(prim) / sizeof(prim[0]); k++)
					if ((size_t)(e - p) == strlen(prim[k].n) && !strncmp(p, prim[k].n, (size_t)(e - p)))
						pc = prim[k].c;
				if (pc) {
					PUTC(pc);
				} else {
					PUTC('L');
					for (const char *c = p; c < e; c++)
						PUTC(*c == '.' ? '/' : *c);
					PUTC(';');
				}
			}
			p = q;
		}
	}
	PUTC(')');
	PUTC('V');
	desc[o] = '\0';
#undef PUTC
	return true;
}

static int frame_type(int layer)
{
	switch (layer) {
	case VP_LAYER_INTERPRETED: return FT_INTERPRETED;
	case VP_LAYER_JIT: return FT_JIT;
	case VP_LAYER_INLINED: return FT_INLINED;
	default: return FT_NATIVE;
	}
}

bool vp_jfr_refuses_event(const char *name)
{
	static const char *const off[] = { "off-cpu", "steal", "wall", "blocked", "runnable", "alloc", "lock" };
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		if (!strcmp(name, off[i]))
			return true;
	return false;
}

static uint64_t meta_u64(const struct vp_profile *p, const char *key)
{
	const char *v = vp_profile__meta(p, key);
	return v ? strtoull(v, NULL, 10) : 0;
}

struct ids {
	uint32_t *frame_method;   /* per frame: method key (1-based) */
	uint32_t *stack_key;      /* per stack: stack trace key, 0 = none */
	uint32_t *stack_thread;   /* per stack: thread key */
};

int report_jfr(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0, err = -ENOMEM;
	if (ev < 0 || ev >= p->nevents)
		ev = 0;
	if (!p->nevents)
		return -EINVAL;
	if (vp_jfr_refuses_event(p->events[ev].name))
		return -EINVAL;
	struct strtab meta = { 0 }, syms = { 0 }, classes_t = { 0 }, pkgs = { 0 };
	struct buf cp = { 0 }, body = { 0 }, evs = { 0 }, chunk = { 0 };
	struct ids id = { 0 };
	uint32_t *cls_pkg = NULL, *cls_sym = NULL;   /* per class: package key, name symbol */
	uint8_t *cls_hidden = NULL;
	size_t cls_cap = 0, cls_cap2 = 0, cls_cap3 = 0;
	struct buf methods = { 0 };
	uint32_t nmethods = 0;
	char cls[1024], meth[1024], desc[1024], simple[1024];

	id.frame_method = calloc(p->nframes + 1, sizeof(*id.frame_method));
	id.stack_key = calloc(p->nstacks + 1, sizeof(*id.stack_key));
	id.stack_thread = calloc(p->nstacks + 1, sizeof(*id.stack_thread));
	if (!id.frame_method || !id.stack_key || !id.stack_thread)
		goto cleanup;

	/* Methods: each frame that a sampled stack uses, with its class and package. */
	uint64_t nsamples = 0;
	uint32_t nstacks = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->samples[ev])
			continue;
		nsamples += s->samples[ev];
		id.stack_key[i] = ++nstacks;
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint32_t f = s->frames[k];
			if (id.frame_method[f])
				continue;
			const struct vp_frame *fr = &p->frames[f];
			int ft = frame_type(fr->layer);
			if (ft == FT_NATIVE || !split_java(fr->name, cls, sizeof(cls), meth, sizeof(meth), desc, sizeof(desc))) {
				/* Native code has no class: the symbol without its argument list is the
				 * method's name, as async-profiler writes native frames. */
				vp_name__simple(fr->name, simple, sizeof(simple));
				cls[0] = '\0';
				snprintf(meth, sizeof(meth), "%s", simple);
				snprintf(desc, sizeof(desc), "()V");
			}
			uint32_t c = st_id(&classes_t, cls);
			if (c == UINT32_MAX)
				goto cleanup;
			if (vp_grow((void **)&cls_pkg, &cls_cap, c + 1, sizeof(*cls_pkg)) ||
			    vp_grow((void **)&cls_sym, &cls_cap2, c + 1, sizeof(*cls_sym)) ||
			    vp_grow((void **)&cls_hidden, &cls_cap3, c + 1, 1))
				goto cleanup;
			if (c + 1 == classes_t.n) {
				/* A new class: its package is the name up to the last '/' (a hidden
				 * class's "/0x..." address is not a package level). */
				char pk[1024];
				snprintf(pk, sizeof(pk), "%s", cls);
				char *hid = strstr(pk, "/0x");
				cls_hidden[c] = hid != NULL;
				if (hid)
					*hid = '\0';
				char *slash = strrchr(pk, '/');
				if (slash)
					*slash = '\0';
				else
					pk[0] = '\0';
				uint32_t pkid = st_id(&pkgs, pk), sym = st_id(&syms, cls);
				if (pkid == UINT32_MAX || sym == UINT32_MAX)
					goto cleanup;
				cls_pkg[c] = pkid;
				cls_sym[c] = sym;
			}
			uint32_t ms = st_id(&syms, meth), ds = st_id(&syms, desc);
			if (ms == UINT32_MAX || ds == UINT32_MAX)
				goto cleanup;
			id.frame_method[f] = ++nmethods;
			/* Method value: type, name, descriptor, modifiers, hidden. */
			b_var(&methods, nmethods);
			b_var(&methods, c + 1);
			b_var(&methods, ms + 1);
			b_var(&methods, ds + 1);
			b_var(&methods, 0);
			b_u8(&methods, 0);
		}
	}

	/* Threads by (pid, tid); the first name seen names the thread. */
	struct thr { uint32_t pid, tid; const char *comm; } *th = NULL;
	size_t nth = 0, thcap = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!id.stack_key[i])
			continue;
		size_t k;
		for (k = 0; k < nth && !(th[k].pid == s->pid && th[k].tid == s->tid); k++)
			;
		if (k == nth) {
			if (vp_grow((void **)&th, &thcap, nth + 1, sizeof(*th))) {
				free(th);
				goto cleanup;
			}
			th[nth++] = (struct thr){ s->pid, s->tid, s->comm && *s->comm ? s->comm : "[unknown]" };
		}
		id.stack_thread[i] = (uint32_t)k + 1;
	}

	/* The checkpoint: every constant pool. */
	uint64_t t0 = meta_u64(p, "start_monotonic_ns"), dur = meta_u64(p, "duration_ns");
	b_var(&cp, 1);          /* type: checkpoint */
	b_var(&cp, t0);
	b_var(&cp, 0);          /* duration */
	b_var(&cp, 0);          /* delta to the previous checkpoint: none */
	b_u8(&cp, 0);           /* a generic checkpoint, not a flush */
	b_var(&cp, 8);          /* pools */
	b_var(&cp, T_THREAD_STATE);
	b_var(&cp, 1);
	b_var(&cp, 1);
	b_str(&cp, "STATE_RUNNABLE");
	b_var(&cp, T_FRAME_TYPE);
	b_var(&cp, 4);
	for (int k = FT_INTERPRETED; k <= FT_NATIVE; k++) {
		b_var(&cp, (uint64_t)k);
		b_str(&cp, frame_types[k]);
	}
	b_var(&cp, T_THREAD);
	b_var(&cp, nth);
	for (size_t k = 0; k < nth; k++) {
		b_var(&cp, k + 1);
		b_str(&cp, th[k].comm);
		b_var(&cp, th[k].tid);
		b_str(&cp, th[k].comm);
		b_var(&cp, th[k].tid);
		b_var(&cp, 0);      /* no thread group */
	}
	free(th);
	b_var(&cp, T_SYMBOL);
	b_var(&cp, syms.n + pkgs.n);
	for (size_t k = 0; k < syms.n; k++) {
		b_var(&cp, k + 1);
		b_str(&cp, syms.s[k]);
	}
	/* Package names are symbols too, numbered after the others. */
	for (size_t k = 0; k < pkgs.n; k++) {
		b_var(&cp, syms.n + k + 1);
		b_str(&cp, pkgs.s[k]);
	}
	b_var(&cp, T_PACKAGE);
	b_var(&cp, pkgs.n);
	for (size_t k = 0; k < pkgs.n; k++) {
		b_var(&cp, k + 1);
		b_var(&cp, syms.n + k + 1);
		b_var(&cp, 0);      /* no module */
		b_u8(&cp, 1);
	}
	b_var(&cp, T_CLASS);
	b_var(&cp, classes_t.n);
	for (size_t k = 0; k < classes_t.n; k++) {
		b_var(&cp, k + 1);
		b_var(&cp, 0);      /* no class loader */
		b_var(&cp, cls_sym[k] + 1);
		b_var(&cp, cls_pkg[k] + 1);
		b_var(&cp, 0);
		b_u8(&cp, cls_hidden[k]);
	}
	b_var(&cp, T_METHOD);
	b_var(&cp, nmethods);
	b_put(&cp, methods.b, methods.len);
	b_var(&cp, T_STACK_TRACE);
	b_var(&cp, nstacks);
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!id.stack_key[i])
			continue;
		b_var(&cp, id.stack_key[i]);
		b_u8(&cp, 0);       /* not truncated as far as the profile knows */
		b_var(&cp, s->nframes);
		for (uint32_t k = s->nframes; k-- > 0;) {   /* JFR lists the leaf first */
			const struct vp_frame *fr = &p->frames[s->frames[k]];
			b_var(&cp, id.frame_method[s->frames[k]]);
			b_var(&cp, fr->line);
			b_var(&cp, 0);
			b_var(&cp, (uint64_t)frame_type(fr->layer));
		}
	}
	if (cp.err || methods.err) {
		err = cp.err ? cp.err : methods.err;
		goto cleanup;
	}

	/* The samples: one event each, the n-th of N at start + duration * (n + 1/2) / N,
	 * the stacks' samples interleaved by stepping through them with a stride prime to N. */
	if (nsamples) {
		uint32_t *order = malloc(nsamples * sizeof(*order));
		if (!order)
			goto cleanup;
		uint64_t n = 0;
		for (size_t i = 0; i < p->nstacks; i++)
			for (uint64_t k = 0; id.stack_key[i] && k < p->stacks[i].samples[ev]; k++)
				order[n++] = (uint32_t)i;
		uint64_t stride = 7919;   /* a prime: prime to N unless N is a multiple of it */
		while (nsamples % stride == 0)
			stride += 2;
		for (uint64_t k = 0; k < nsamples; k++) {
			uint32_t i = order[(k * stride) % nsamples];
			body.len = 0;
			b_var(&body, T_EXECUTION_SAMPLE);
			b_var(&body, t0 + (uint64_t)((double)dur * ((double)k + 0.5) / (double)nsamples));
			b_var(&body, id.stack_thread[i]);
			b_var(&body, id.stack_key[i]);
			b_var(&body, 1);
			b_event(&evs, &body);
		}
		free(order);
	}

	/* Metadata. */
	body.len = 0;
	b_var(&body, 0);        /* type: metadata */
	b_var(&body, t0);
	b_var(&body, 0);
	b_var(&body, 1);        /* metadata id */
	metadata_tree(&body, &meta);
	struct buf mev = { 0 }, cev = { 0 };
	b_event(&mev, &body);
	b_event(&cev, &cp);

	/* The chunk: header, samples, metadata, checkpoint. */
	uint64_t meta_pos = 68 + evs.len, cp_pos = meta_pos + mev.len, size = cp_pos + cev.len;
	b_put(&chunk, "FLR", 4);
	b_be(&chunk, 2, 2);
	b_be(&chunk, 1, 2);
	b_be(&chunk, size, 8);
	b_be(&chunk, cp_pos, 8);
	b_be(&chunk, meta_pos, 8);
	b_be(&chunk, meta_u64(p, "start_realtime_ns"), 8);
	b_be(&chunk, dur, 8);
	b_be(&chunk, t0, 8);
	b_be(&chunk, 1000000000ull, 8);   /* ticks are CLOCK_MONOTONIC ns */
	b_be(&chunk, 3, 4);                /* varint integers, final chunk */
	int e2 = chunk.err ? chunk.err : evs.err ? evs.err : mev.err ? mev.err : cev.err;
	if (!e2) {
		vp_out__write(o, chunk.b, chunk.len);
		vp_out__write(o, evs.b, evs.len);
		vp_out__write(o, mev.b, mev.len);
		vp_out__write(o, cev.b, cev.len);
	}
	free(mev.b);
	free(cev.b);
	err = e2 ? e2 : o->err;
cleanup:
	st_free(&meta);
	st_free(&syms);
	st_free(&classes_t);
	st_free(&pkgs);
	free(cp.b);
	free(body.b);
	free(evs.b);
	free(chunk.b);
	free(methods.b);
	free(cls_pkg);
	free(cls_sym);
	free(cls_hidden);
	free(id.frame_method);
	free(id.stack_key);
	free(id.stack_thread);
	return err;
}
