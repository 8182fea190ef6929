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

#include "common/steal_est.h"
#include "common/pbuf.h"
#include "common/strtab.h"
#include "common/util.h"
#include "postproc/profile_xform.h"
#include "postproc/report.h"

/* Class ids: 0 and 1 are the metadata and checkpoint events. */
enum {
	T_EXECUTION_SAMPLE = 100, T_ALLOCATION_SAMPLE = 90, T_MONITOR_ENTER = 91, T_THREAD_PARK = 92, T_LONG = 101, T_INT, T_BOOLEAN, T_STRING, T_THREAD, T_THREAD_GROUP, T_CLASS,
	T_CLASS_LOADER, T_METHOD, T_SYMBOL, T_PACKAGE, T_MODULE, T_STACK_TRACE, T_STACK_FRAME, T_FRAME_TYPE,
	T_THREAD_STATE, T_LABEL, T_TIMESTAMP, T_TIMESPAN,
};

enum { FT_INTERPRETED = 1, FT_JIT, FT_INLINED, FT_NATIVE };
static const char *const frame_types[] = { "", "Interpreted", "JIT compiled", "Inlined", "Native" };

/* JFR's integers are the nine-byte varints of common/pbuf.h; a string is an encoding
 * byte, then for UTF-8 its length and bytes. */
static void b_str(struct vp_buf *b, const char *s)
{
	if (!s) {
		vp_buf__u8(b, 0);
		return;
	}
	size_t n = strlen(s);
	if (!n) {
		vp_buf__u8(b, 1);
		return;
	}
	vp_buf__u8(b, 3);
	vp_buf__varint9(b, n);
	vp_buf__put(b, s, n);
}

/* Appends body as one event: its size (counting the size's own bytes) first. */
static void b_event(struct vp_buf *out, const struct vp_buf *body)
{
	if (body->err) {
		out->err = out->err ? out->err : body->err;
		return;
	}
	size_t n = body->len + 1;
	while (vp_varint9_len(n) + body->len != n)
		n = body->len + vp_varint9_len(n);
	vp_buf__varint9(out, n);
	vp_buf__put(out, body->b, body->len);
}

/* Strings interned to ids 0..n-1 (the metadata's string table, the symbol pool), copied:
 * some are built in local buffers. UINT32_MAX on ENOMEM. */
static uint32_t st_id(struct vp_strtab *t, const char *s)
{
	int64_t id = vp_strtab__id_copy(t, s);
	return id < 0 ? UINT32_MAX : (uint32_t)id;
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
	bool span;          /* @Timespan("TICKS") */
};
struct mclass {
	int id;
	const char *name, *super, *label;
	bool simple;
	struct mfield f[8];
};

static const struct mclass classes[] = {
	{ T_EXECUTION_SAMPLE, "jdk.ExecutionSample", "jdk.jfr.Event", "Method Profiling Sample", false, {
		{ "startTime", T_LONG, false, false, "Start Time", true },
		{ "sampledThread", T_THREAD, true, false, "Thread", false },
		{ "stackTrace", T_STACK_TRACE, true, false, "Stack Trace", false },
		{ "state", T_THREAD_STATE, true, false, "Thread State", false } } },
	{ T_ALLOCATION_SAMPLE, "jdk.ObjectAllocationSample", "jdk.jfr.Event", "Object Allocation Sample", false, {
		{ "startTime", T_LONG, false, false, "Start Time", true, false },
		{ "eventThread", T_THREAD, true, false, "Event Thread", false, false },
		{ "stackTrace", T_STACK_TRACE, true, false, "Stack Trace", false, false },
		{ "objectClass", T_CLASS, true, false, "Object Class", false, false },
		{ "weight", T_LONG, false, false, "Sample Weight", false, false } } },
	{ T_MONITOR_ENTER, "jdk.JavaMonitorEnter", "jdk.jfr.Event", "Java Monitor Blocked", false, {
		{ "startTime", T_LONG, false, false, "Start Time", true, false },
		{ "duration", T_LONG, false, false, "Duration", false, true },
		{ "eventThread", T_THREAD, true, false, "Event Thread", false, false },
		{ "stackTrace", T_STACK_TRACE, true, false, "Stack Trace", false, false },
		{ "monitorClass", T_CLASS, true, false, "Monitor Class", false, false },
		{ "previousOwner", T_THREAD, true, false, "Previous Monitor Owner", false, false },
		{ "address", T_LONG, false, false, "Monitor Address", false, false } } },
	{ T_THREAD_PARK, "jdk.ThreadPark", "jdk.jfr.Event", "Java Thread Park", false, {
		{ "startTime", T_LONG, false, false, "Start Time", true, false },
		{ "duration", T_LONG, false, false, "Duration", false, true },
		{ "eventThread", T_THREAD, true, false, "Event Thread", false, false },
		{ "stackTrace", T_STACK_TRACE, true, false, "Stack Trace", false, false },
		{ "parkedClass", T_CLASS, true, false, "Class Parked On", false, false },
		{ "timeout", T_LONG, false, false, "Park Timeout", false, false },
		{ "until", T_LONG, false, false, "Park Until", false, false },
		{ "address", T_LONG, false, false, "Address of Object Parked", false, false } } },
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
	{ T_TIMESPAN, "jdk.jfr.Timespan", "java.lang.annotation.Annotation", NULL, false, {
		{ "value", T_STRING, false, false, NULL, false } } },
};

/* One element of the metadata tree: name, attributes (string ids), then children written
 * by the caller right after (nchildren counts them). */
static void el(struct vp_buf *b, struct vp_strtab *s, const char *name, int nattr, const char *const *attr, uint32_t nchildren)
{
	vp_buf__varint9(b, st_id(s, name));
	vp_buf__varint9(b, (uint64_t)nattr);
	for (int i = 0; i < 2 * nattr; i++)
		vp_buf__varint9(b, st_id(s, attr[i]));
	vp_buf__varint9(b, nchildren);
}

static void annotation(struct vp_buf *b, struct vp_strtab *s, int cls, const char *value)
{
	char id[16];
	snprintf(id, sizeof(id), "%d", cls);
	const char *a[] = { "class", id, "value", value };
	el(b, s, "annotation", 2, a, 0);
}

/* The metadata event's body after its header fields: the string table, then the tree. */
static void metadata_tree(struct vp_buf *out, struct vp_strtab *s)
{
	struct vp_buf t = { 0 };
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
		while (nf < 8 && c->f[nf].name)
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
			el(&t, s, "field", nfa, fa, (f->label ? 1u : 0u) + (f->ticks ? 1u : 0u) + (f->span ? 1u : 0u));
			if (f->label)
				annotation(&t, s, T_LABEL, f->label);
			if (f->ticks)
				annotation(&t, s, T_TIMESTAMP, "TICKS");
			if (f->span)
				annotation(&t, s, T_TIMESPAN, "TICKS");
		}
		if (c->label)
			annotation(&t, s, T_LABEL, c->label);
	}
	const char *region[] = { "locale", "en_US", "gmtOffset", "0" };
	el(&t, s, "region", 2, region, 0);
	/* The string table comes first, so it is written once the tree has named them all. */
	vp_buf__varint9(out, s->n);
	for (size_t i = 0; i < s->n; i++)
		b_str(out, s->v[i]);
	vp_buf__put(out, t.b, t.len);
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
	/* The steal estimate (common/steal_est.h) is not CPU time either: the host had the vCPU. */
	static const char *const off[] = { "off-cpu", "steal", "wall", "blocked", "runnable", VP_STEAL_EST_EVENT };
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

/* JVM names for a class as the profile names it: "long[]" -> "[J", "a.B" -> "a/B",
 * "a.B[]" -> "[La/B;" (how the JVM and JFR name classes). */
static void internal_class(const char *name, char *out, size_t len)
{
	static const struct { const char *n; char c; } prim[] = {
		{ "boolean", 'Z' }, { "byte", 'B' }, { "char", 'C' }, { "short", 'S' },
		{ "int", 'I' }, { "long", 'J' }, { "float", 'F' }, { "double", 'D' },
	};
	size_t n = strlen(name), o = 0;
	int dims = 0;
	while (n >= 2 && name[n - 2] == '[' && name[n - 1] == ']') {
		n -= 2;
		dims++;
	}
	for (int d = 0; d < dims && o + 1 < len; d++)
		out[o++] = '[';
	char pc = 0;
	for (size_t k = 0; dims && k < sizeof(prim) / sizeof(prim[0]); k++)
		if (strlen(prim[k].n) == n && !strncmp(name, prim[k].n, n))
			pc = prim[k].c;
	if (pc) {
		if (o + 1 < len)
			out[o++] = pc;
	} else {
		if (dims && o + 1 < len)
			out[o++] = 'L';
		for (size_t k = 0; k < n && o + 1 < len; k++)
			out[o++] = name[k] == '.' ? '/' : name[k];
		if (dims && o + 1 < len)
			out[o++] = ';';
	}
	out[o] = '\0';
}

/* Everything the pools are made of, and what the events refer to. */
struct jw {
	const struct vp_profile *p;
	struct vp_strtab syms, classes, pkgs;
	uint32_t *cls_pkg, *cls_sym;           /* per class: package key - 1, name symbol - 1 */
	uint8_t *cls_hidden;
	size_t cap_pkg, cap_sym, cap_hidden;
	struct vp_buf methods;                    /* the method pool's entries */
	uint32_t nmethods, *frame_method;      /* per frame: method key, 0 = none yet */
	struct vp_buf traces;                     /* the stack trace pool's entries */
	uint32_t ntraces;
};

/* The class key (1-based) of a class by its JVM name, made with its symbol and package
 * when new; 0 on ENOMEM. */
static uint32_t class_key(struct jw *w, const char *cls)
{
	uint32_t c = st_id(&w->classes, cls);
	if (c == UINT32_MAX || vp_grow((void **)&w->cls_pkg, &w->cap_pkg, c + 1, sizeof(*w->cls_pkg)) ||
	    vp_grow((void **)&w->cls_sym, &w->cap_sym, c + 1, sizeof(*w->cls_sym)) ||
	    vp_grow((void **)&w->cls_hidden, &w->cap_hidden, c + 1, 1))
		return 0;
	if (c + 1 == w->classes.n) {
		/* A new class: its package is the name up to the last '/' (a hidden class's
		 * "/0x..." address is not a package level; an array has none). */
		char pk[1024];
		snprintf(pk, sizeof(pk), "%s", cls[0] == '[' ? "" : cls);
		char *hid = strstr(pk, "/0x");
		w->cls_hidden[c] = hid != NULL;
		if (hid)
			*hid = '\0';
		char *slash = strrchr(pk, '/');
		if (slash)
			*slash = '\0';
		else
			pk[0] = '\0';
		uint32_t pkid = st_id(&w->pkgs, pk), sym = st_id(&w->syms, cls);
		if (pkid == UINT32_MAX || sym == UINT32_MAX)
			return 0;
		w->cls_pkg[c] = pkid;
		w->cls_sym[c] = sym;
	}
	return c + 1;
}

/* The method key of frame f, made when new; 0 on ENOMEM. */
static uint32_t method_key(struct jw *w, uint32_t f)
{
	char cls[1024], meth[1024], desc[1024];
	if (w->frame_method[f])
		return w->frame_method[f];
	const struct vp_frame *fr = &w->p->frames[f];
	if (frame_type(fr->layer) == FT_NATIVE || !split_java(fr->name, cls, sizeof(cls), meth, sizeof(meth), desc, sizeof(desc))) {
		/* Native code has no class: the symbol without its argument list is the
		 * method's name, as async-profiler writes native frames. */
		vp_name__simple(fr->name, meth, sizeof(meth));
		cls[0] = '\0';
		snprintf(desc, sizeof(desc), "()V");
	}
	uint32_t c = class_key(w, cls), ms = st_id(&w->syms, meth), ds = st_id(&w->syms, desc);
	if (!c || ms == UINT32_MAX || ds == UINT32_MAX)
		return 0;
	w->frame_method[f] = ++w->nmethods;
	/* Method value: type, name, descriptor, modifiers, hidden. */
	vp_buf__varint9(&w->methods, w->nmethods);
	vp_buf__varint9(&w->methods, c);
	vp_buf__varint9(&w->methods, ms + 1);
	vp_buf__varint9(&w->methods, ds + 1);
	vp_buf__varint9(&w->methods, 0);
	vp_buf__u8(&w->methods, 0);
	return w->nmethods;
}

/* A stack trace entry for frames[0 .. n) (root first) of stack s; its key, 0 on ENOMEM. */
static uint32_t trace_key(struct jw *w, const struct vp_stack *s, uint32_t n)
{
	uint32_t key = ++w->ntraces;
	vp_buf__varint9(&w->traces, key);
	vp_buf__u8(&w->traces, 0);       /* not truncated as far as the profile knows */
	vp_buf__varint9(&w->traces, n);
	for (uint32_t k = n; k-- > 0;) {   /* JFR lists the leaf first */
		const struct vp_frame *fr = &w->p->frames[s->frames[k]];
		uint32_t m = method_key(w, s->frames[k]);
		if (!m)
			return 0;
		vp_buf__varint9(&w->traces, m);
		vp_buf__varint9(&w->traces, fr->line);
		vp_buf__varint9(&w->traces, 0);
		vp_buf__varint9(&w->traces, (uint64_t)frame_type(fr->layer));
	}
	return w->traces.err ? 0 : key;
}

enum kind { K_CPU, K_ALLOC, K_LOCK };

/* One event kind's events: every sample of event ev, at times spread evenly over the
 * recording (the n-th of N at start + duration * (n + 1/2) / N), the stacks' samples
 * interleaved by stepping through them with a stride prime to N. */
static int write_events(struct jw *w, struct vp_buf *evs, int ev, enum kind kind, const uint32_t *trace,
			const uint32_t *thread, const uint32_t *cls, const bool *park, uint64_t t0, uint64_t dur)
{
	const struct vp_profile *p = w->p;
	uint64_t n = 0, total = 0;
	struct vp_buf body = { 0 };
	for (size_t i = 0; i < p->nstacks; i++)
		total += trace[i] ? p->stacks[i].samples[ev] : 0;
	if (!total)
		return 0;
	uint32_t *order = malloc(total * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < p->nstacks; i++)
		for (uint64_t k = 0; trace[i] && k < p->stacks[i].samples[ev]; k++)
			order[n++] = (uint32_t)i;
	uint64_t stride = 7919;   /* a prime: prime to N unless N is a multiple of it */
	while (total % stride == 0)
		stride += 2;
	for (uint64_t k = 0; k < total; k++) {
		uint32_t i = order[(k * stride) % total];
		const struct vp_stack *s = &p->stacks[i];
		uint64_t each = s->samples[ev] ? s->weight[ev] / s->samples[ev] : 0;
		body.len = 0;
		vp_buf__varint9(&body, kind == K_CPU ? T_EXECUTION_SAMPLE : kind == K_ALLOC ? T_ALLOCATION_SAMPLE :
			     park[i] ? T_THREAD_PARK : T_MONITOR_ENTER);
		vp_buf__varint9(&body, t0 + (uint64_t)((double)dur * ((double)k + 0.5) / (double)total));
		if (kind == K_LOCK)
			vp_buf__varint9(&body, each);            /* duration: the time waited */
		vp_buf__varint9(&body, thread[i]);
		vp_buf__varint9(&body, trace[i]);
		if (kind == K_CPU) {
			vp_buf__varint9(&body, 1);               /* STATE_RUNNABLE */
		} else if (kind == K_ALLOC) {
			vp_buf__varint9(&body, cls[i]);
			vp_buf__varint9(&body, each);            /* bytes the sample stands for */
		} else if (park[i]) {
			vp_buf__varint9(&body, cls[i]);
			vp_buf__varint9(&body, 0);               /* timeout and until: not recorded */
			vp_buf__varint9(&body, 0);
			vp_buf__varint9(&body, 0);               /* address */
		} else {
			vp_buf__varint9(&body, cls[i]);
			vp_buf__varint9(&body, 0);               /* previous owner: not recorded */
			vp_buf__varint9(&body, 0);
		}
		b_event(evs, &body);
	}
	free(order);
	free(body.b);
	return evs->err;
}

static int find_event(const struct vp_profile *p, const char *name)
{
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, name))
			return e;
	return -1;
}

int report_jfr(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0, err = -ENOMEM;
	if (!p->nevents)
		return -EINVAL;
	if (ev < 0 || ev >= p->nevents)
		ev = 0;
	if (vp_jfr_refuses_event(p->events[ev].name))
		return -EINVAL;
	/* The CPU samples: the event asked for, or the first CPU one when that is alloc or
	 * lock, which have events of their own and are always written when recorded. */
	int alloc_ev = find_event(p, "alloc"), lock_ev = find_event(p, "lock");
	int cpu_ev = ev == alloc_ev || ev == lock_ev ? -1 : ev;
	for (int e = 0; cpu_ev < 0 && e < p->nevents; e++)
		if (e != alloc_ev && e != lock_ev && !vp_jfr_refuses_event(p->events[e].name))
			cpu_ev = e;
	struct jw w = { .p = p };
	struct vp_strtab meta = { 0 };
	struct vp_buf cp = { 0 }, body = { 0 }, evs = { 0 }, chunk = { 0 }, mev = { 0 }, cev = { 0 };
	uint32_t *trace[3] = { NULL }, *thread = NULL, *cls = NULL;
	bool *park = NULL;
	struct thr { uint32_t pid, tid; const char *comm; } *th = NULL;
	size_t nth = 0, thcap = 0;
	const int kev[3] = { cpu_ev, alloc_ev, lock_ev };

	w.frame_method = calloc(p->nframes + 1, sizeof(*w.frame_method));
	thread = calloc(p->nstacks + 1, sizeof(*thread));
	cls = calloc(p->nstacks + 1, sizeof(*cls));
	park = calloc(p->nstacks + 1, sizeof(*park));
	for (int k = 0; k < 3; k++)
		trace[k] = calloc(p->nstacks + 1, sizeof(*trace[k]));
	if (!w.frame_method || !thread || !cls || !park || !trace[0] || !trace[1] || !trace[2])
		goto cleanup;

	/* Stack traces, classes, methods and threads of every stack an event uses. The
	 * allocation and lock stacks end in the class (the profile's leaf frame), which JFR
	 * has as a field of the event rather than as a frame. */
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool used = false;
		for (int k = 0; k < 3; k++) {
			if (kev[k] < 0 || !s->samples[kev[k]])
				continue;
			used = true;
			bool leaf_class = k != K_CPU && s->nframes > 0;
			if (!(trace[k][i] = trace_key(&w, s, s->nframes - (leaf_class ? 1 : 0))))
				goto cleanup;
			if (leaf_class) {
				char jn[1024];
				internal_class(p->frames[s->frames[s->nframes - 1]].name, jn, sizeof(jn));
				if (!(cls[i] = class_key(&w, jn)))
					goto cleanup;
			}
			if (k == K_LOCK)
				for (uint32_t f = 0; f < s->nframes; f++)
					park[i] |= !strncmp(p->frames[s->frames[f]].name,
							    "java.util.concurrent.locks.LockSupport.park", 43) ||
						   !strncmp(p->frames[s->frames[f]].name, "jdk.internal.misc.Unsafe.park", 29);
		}
		if (!used)
			continue;
		size_t t;
		for (t = 0; t < nth && !(th[t].pid == s->pid && th[t].tid == s->tid); t++)
			;
		if (t == nth) {
			if (vp_grow((void **)&th, &thcap, nth + 1, sizeof(*th)))
				goto cleanup;
			th[nth++] = (struct thr){ s->pid, s->tid, s->comm && *s->comm ? s->comm : "[unknown]" };
		}
		thread[i] = (uint32_t)t + 1;
	}

	/* The checkpoint: every constant pool. */
	uint64_t t0 = meta_u64(p, "start_monotonic_ns"), dur = meta_u64(p, "duration_ns");
	vp_buf__varint9(&cp, 1);          /* type: checkpoint */
	vp_buf__varint9(&cp, t0);
	vp_buf__varint9(&cp, 0);          /* duration */
	vp_buf__varint9(&cp, 0);          /* delta to the previous checkpoint: none */
	vp_buf__u8(&cp, 0);           /* a generic checkpoint, not a flush */
	vp_buf__varint9(&cp, 8);          /* pools */
	vp_buf__varint9(&cp, T_THREAD_STATE);
	vp_buf__varint9(&cp, 1);
	vp_buf__varint9(&cp, 1);
	b_str(&cp, "STATE_RUNNABLE");
	vp_buf__varint9(&cp, T_FRAME_TYPE);
	vp_buf__varint9(&cp, 4);
	for (int k = FT_INTERPRETED; k <= FT_NATIVE; k++) {
		vp_buf__varint9(&cp, (uint64_t)k);
		b_str(&cp, frame_types[k]);
	}
	vp_buf__varint9(&cp, T_THREAD);
	vp_buf__varint9(&cp, nth);
	for (size_t k = 0; k < nth; k++) {
		vp_buf__varint9(&cp, k + 1);
		b_str(&cp, th[k].comm);
		vp_buf__varint9(&cp, th[k].tid);
		b_str(&cp, th[k].comm);
		vp_buf__varint9(&cp, th[k].tid);
		vp_buf__varint9(&cp, 0);      /* no thread group */
	}
	vp_buf__varint9(&cp, T_SYMBOL);
	vp_buf__varint9(&cp, w.syms.n + w.pkgs.n);
	for (size_t k = 0; k < w.syms.n; k++) {
		vp_buf__varint9(&cp, k + 1);
		b_str(&cp, w.syms.v[k]);
	}
	/* Package names are symbols too, numbered after the others. */
	for (size_t k = 0; k < w.pkgs.n; k++) {
		vp_buf__varint9(&cp, w.syms.n + k + 1);
		b_str(&cp, w.pkgs.v[k]);
	}
	vp_buf__varint9(&cp, T_PACKAGE);
	vp_buf__varint9(&cp, w.pkgs.n);
	for (size_t k = 0; k < w.pkgs.n; k++) {
		vp_buf__varint9(&cp, k + 1);
		vp_buf__varint9(&cp, w.syms.n + k + 1);
		vp_buf__varint9(&cp, 0);      /* no module */
		vp_buf__u8(&cp, 1);
	}
	vp_buf__varint9(&cp, T_CLASS);
	vp_buf__varint9(&cp, w.classes.n);
	for (size_t k = 0; k < w.classes.n; k++) {
		vp_buf__varint9(&cp, k + 1);
		vp_buf__varint9(&cp, 0);      /* no class loader */
		vp_buf__varint9(&cp, w.cls_sym[k] + 1);
		vp_buf__varint9(&cp, w.cls_pkg[k] + 1);
		vp_buf__varint9(&cp, 0);
		vp_buf__u8(&cp, w.cls_hidden[k]);
	}
	vp_buf__varint9(&cp, T_METHOD);
	vp_buf__varint9(&cp, w.nmethods);
	vp_buf__put(&cp, w.methods.b, w.methods.len);
	vp_buf__varint9(&cp, T_STACK_TRACE);
	vp_buf__varint9(&cp, w.ntraces);
	vp_buf__put(&cp, w.traces.b, w.traces.len);
	if ((err = cp.err ? cp.err : w.methods.err ? w.methods.err : w.traces.err))
		goto cleanup;
	err = -ENOMEM;

	for (int k = 0; k < 3; k++)
		if (kev[k] >= 0 && (err = write_events(&w, &evs, kev[k], (enum kind)k, trace[k], thread, cls, park, t0, dur)))
			goto cleanup;

	/* Metadata. */
	vp_buf__varint9(&body, 0);        /* type: metadata */
	vp_buf__varint9(&body, t0);
	vp_buf__varint9(&body, 0);
	vp_buf__varint9(&body, 1);        /* metadata id */
	metadata_tree(&body, &meta);
	b_event(&mev, &body);
	b_event(&cev, &cp);

	/* The chunk: header, events, metadata, checkpoint. */
	uint64_t meta_pos = 68 + evs.len, cp_pos = meta_pos + mev.len, size = cp_pos + cev.len;
	vp_buf__put(&chunk, "FLR", 4);
	vp_buf__be(&chunk, 2, 2);
	vp_buf__be(&chunk, 1, 2);
	vp_buf__be(&chunk, size, 8);
	vp_buf__be(&chunk, cp_pos, 8);
	vp_buf__be(&chunk, meta_pos, 8);
	vp_buf__be(&chunk, meta_u64(p, "start_realtime_ns"), 8);
	vp_buf__be(&chunk, dur, 8);
	vp_buf__be(&chunk, t0, 8);
	vp_buf__be(&chunk, 1000000000ull, 8);   /* ticks are CLOCK_MONOTONIC ns */
	vp_buf__be(&chunk, 3, 4);                /* varint integers, final chunk */
	err = chunk.err ? chunk.err : evs.err ? evs.err : mev.err ? mev.err : cev.err;
	if (!err) {
		vp_out__write(o, chunk.b, chunk.len);
		vp_out__write(o, evs.b, evs.len);
		vp_out__write(o, mev.b, mev.len);
		vp_out__write(o, cev.b, cev.len);
		err = o->err;
	}
cleanup:
	vp_strtab__free(&meta);
	vp_strtab__free(&w.syms);
	vp_strtab__free(&w.classes);
	vp_strtab__free(&w.pkgs);
	free(w.cls_pkg);
	free(w.cls_sym);
	free(w.cls_hidden);
	free(w.methods.b);
	free(w.traces.b);
	free(w.frame_method);
	free(cp.b);
	free(body.b);
	free(evs.b);
	free(chunk.b);
	free(mev.b);
	free(cev.b);
	free(th);
	free(thread);
	free(cls);
	free(park);
	for (int k = 0; k < 3; k++)
		free(trace[k]);
	return err;
}
