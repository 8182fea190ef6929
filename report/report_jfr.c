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
 * Events have their own times (issue 33): the loader keeps each sample record's time and
 * weight for this writer (vp_profile.spans). A CPU sample and an allocation are instants;
 * a lock wait (the agent's, timed from its start to its end) and an off-CPU interval the
 * switch tracer kept apart (VP_SPAN_ONE_INTERVAL: at least 10 ms) are events with their
 * real start and duration. Off-CPU time summed over shorter intervals has no start of its
 * own and is left out, as JFR's own thresholds leave short waits out; the ActiveSetting
 * events say the threshold. Events are written in the order of their start times, after
 * the environment events JMC's pages read (JVM, OS and CPU information, the recording
 * and its settings). A profile without sample times (a fleet query, a synthetic profile)
 * falls back to times spread evenly over the recording, each stack's samples with its
 * mean weight, and no off-CPU events (docs/java.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/steal_est.h"
#include "common/pbuf.h"
#include "common/strtab.h"
#include "common/util.h"
#include "postproc/profile_xform.h"
#include "report/report.h"

/* Class ids: 0 and 1 are the metadata and checkpoint events. */
enum {
	T_JVM_INFO = 80, T_OS_INFO, T_CPU_INFO, T_ACTIVE_RECORDING, T_ACTIVE_SETTING, T_THREAD_BLOCKED,
	T_THREAD_RUNNABLE,
	T_EXECUTION_SAMPLE = 100, T_ALLOCATION_SAMPLE = 90, T_MONITOR_ENTER = 91, T_THREAD_PARK = 92, T_LONG = 101, T_INT, T_BOOLEAN, T_STRING, T_THREAD, T_THREAD_GROUP, T_CLASS,
	T_CLASS_LOADER, T_METHOD, T_SYMBOL, T_PACKAGE, T_MODULE, T_STACK_TRACE, T_STACK_FRAME, T_FRAME_TYPE,
	T_THREAD_STATE, T_LABEL, T_TIMESTAMP, T_TIMESPAN, T_DESCRIPTION,
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
	const char *unit;   /* @Timestamp("MILLISECONDS_SINCE_EPOCH") or @Timespan("MILLISECONDS") */
	bool unit_span;
};
struct mclass {
	int id;
	const char *name, *super, *label;
	bool simple;
	struct mfield f[12];
	const char *description;
};

/* Fields every event of a given shape starts with. */
#define F_START { "startTime", T_LONG, false, false, "Start Time", true, false, NULL, false }
#define F_DURATION { "duration", T_LONG, false, false, "Duration", false, true, NULL, false }
#define F_THREAD { "eventThread", T_THREAD, true, false, "Event Thread", false, false, NULL, false }
#define F_STACK { "stackTrace", T_STACK_TRACE, true, false, "Stack Trace", false, false, NULL, false }
#define F_STR(n, l) { n, T_STRING, false, false, l, false, false, NULL, false }
#define F_LONG(n, l) { n, T_LONG, false, false, l, false, false, NULL, false }
#define F_INT(n, l) { n, T_INT, false, false, l, false, false, NULL, false }
#define F_MS_EPOCH(n, l) { n, T_LONG, false, false, l, false, false, "MILLISECONDS_SINCE_EPOCH", false }
#define F_MS(n, l) { n, T_LONG, false, false, l, false, false, "MILLISECONDS", true }
/* An off-CPU interval's event: where the thread waited, and what it was doing. */
#define OFFCPU_FIELDS { F_START, F_DURATION, F_THREAD, F_STACK, F_STR("state", "State") }

static const struct mclass classes[] = {
	{ T_JVM_INFO, "jdk.JVMInformation", "jdk.jfr.Event", "JVM Information", false, {
		F_START, F_STR("jvmName", "JVM Name"), F_STR("jvmVersion", "JVM Version"),
		F_STR("jvmArguments", "JVM Command Line Arguments"), F_STR("jvmFlags", "JVM Settings File Arguments"),
		F_STR("javaArguments", "Java Application Arguments"), F_MS_EPOCH("jvmStartTime", "JVM Start Time"),
		F_LONG("pid", "Process Identifier") } },
	{ T_OS_INFO, "jdk.OSInformation", "jdk.jfr.Event", "OS Information", false, {
		F_START, F_STR("osVersion", "OS Version") } },
	{ T_CPU_INFO, "jdk.CPUInformation", "jdk.jfr.Event", "CPU Information", false, {
		F_START, F_STR("cpu", "Type"), F_STR("description", "Description"), F_INT("sockets", "Sockets"),
		F_INT("cores", "Cores"), F_INT("hwThreads", "Hardware Threads") } },
	{ T_ACTIVE_RECORDING, "jdk.ActiveRecording", "jdk.jfr.Event", "Flight Recording", false, {
		F_START, F_DURATION, F_THREAD, F_STACK, F_LONG("id", "Id"), F_STR("name", "Name"),
		F_STR("destination", "Destination"), F_MS("maxAge", "Max Age"), F_MS("flushInterval", "Flush Interval"),
		F_LONG("maxSize", "Max Size"), F_MS_EPOCH("recordingStart", "Start Time"),
		F_MS("recordingDuration", "Recording Duration") } },
	{ T_ACTIVE_SETTING, "jdk.ActiveSetting", "jdk.jfr.Event", "Recording Setting", false, {
		F_START, F_DURATION, F_THREAD, F_STACK, F_LONG("id", "Event Id"), F_STR("name", "Setting Name"),
		F_STR("value", "Setting Value") } },
	{ T_THREAD_BLOCKED, "viprof.ThreadBlocked", "jdk.jfr.Event", "Thread Blocked (off-CPU)", false, OFFCPU_FIELDS,
	  "A thread off CPU and not runnable (sleeping, parked, waiting for a lock, I/O or a file descriptor) for "
	  "one interval of at least the threshold, measured at context switches by viprof's switch tracer; state "
	  "names the wait as viprof's reports do" },
	{ T_THREAD_RUNNABLE, "viprof.ThreadRunnable", "jdk.jfr.Event", "Thread Runnable (off-CPU)", false, OFFCPU_FIELDS,
	  "A thread ready to run but waiting on the run queue (preempted, or woken and not yet on a CPU) for one "
	  "interval of at least the threshold, measured at context switches by viprof's switch tracer" },
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
	{ T_DESCRIPTION, "jdk.jfr.Description", "java.lang.annotation.Annotation", NULL, false, {
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
		while (nf < 12 && c->f[nf].name)
			nf++;
		el(&t, s, "class", na, a, nf + (c->label ? 1 : 0) + (c->description ? 1 : 0));
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
			el(&t, s, "field", nfa, fa, (f->label ? 1u : 0u) + (f->ticks ? 1u : 0u) + (f->span ? 1u : 0u) +
						     (f->unit ? 1u : 0u));
			if (f->label)
				annotation(&t, s, T_LABEL, f->label);
			if (f->ticks)
				annotation(&t, s, T_TIMESTAMP, "TICKS");
			if (f->span)
				annotation(&t, s, T_TIMESPAN, "TICKS");
			if (f->unit)
				annotation(&t, s, f->unit_span ? T_TIMESPAN : T_TIMESTAMP, f->unit);
		}
		if (c->label)
			annotation(&t, s, T_LABEL, c->label);
		if (c->description)
			annotation(&t, s, T_DESCRIPTION, c->description);
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
	/* off-cpu has events of its own, written whenever it was recorded, as alloc and lock; the
	 * steal estimate (common/steal_est.h) is not CPU time either: the host had the vCPU. */
	static const char *const off[] = { "steal", "wall", "blocked", "runnable", VP_STEAL_EST_EVENT };
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

enum kind { K_CPU, K_ALLOC, K_LOCK, K_OFF, K__COUNT };

/* What the events of a stack refer to, per stack index. */
struct refs {
	uint32_t *trace[K__COUNT];   /* stack trace key per kind, 0 = none */
	uint32_t *thread, *cls;
	bool *park;                  /* a lock wait in java.util.concurrent's park */
	const char **state;          /* an off-CPU stack's state frame ("[blocked: sleep]") */
};

/* One event: kind, stack, start (ticks), duration (ns; 0 for an instant), weight. */
struct jev {
	uint64_t start, dur, weight;
	uint32_t stack;
	uint8_t kind;
};

/* Appends one event of kind for stack i. */
static void put_event(struct vp_buf *evs, struct vp_buf *body, const struct refs *r, enum kind kind, uint32_t i,
		      uint64_t start, uint64_t dur, uint64_t weight)
{
	body->len = 0;
	if (kind == K_OFF) {
		const char *st = r->state[i];
		bool runnable = !strncmp(st, "[runnable", 9);
		char state[128];
		/* "[blocked: sleep]" -> "blocked: sleep" */
		snprintf(state, sizeof(state), "%.*s", (int)strcspn(st + 1, "]"), st + 1);
		vp_buf__varint9(body, runnable ? T_THREAD_RUNNABLE : T_THREAD_BLOCKED);
		vp_buf__varint9(body, start);
		vp_buf__varint9(body, dur);
		vp_buf__varint9(body, r->thread[i]);
		vp_buf__varint9(body, r->trace[K_OFF][i]);
		b_str(body, state);
		b_event(evs, body);
		return;
	}
	vp_buf__varint9(body, kind == K_CPU ? T_EXECUTION_SAMPLE : kind == K_ALLOC ? T_ALLOCATION_SAMPLE :
			r->park[i] ? T_THREAD_PARK : T_MONITOR_ENTER);
	vp_buf__varint9(body, start);
	if (kind == K_LOCK)
		vp_buf__varint9(body, dur);              /* duration: the time waited */
	vp_buf__varint9(body, r->thread[i]);
	vp_buf__varint9(body, r->trace[kind][i]);
	if (kind == K_CPU) {
		vp_buf__varint9(body, 1);                /* STATE_RUNNABLE */
	} else if (kind == K_ALLOC) {
		vp_buf__varint9(body, r->cls[i]);
		vp_buf__varint9(body, weight);           /* bytes the sample stands for */
	} else if (r->park[i]) {
		vp_buf__varint9(body, r->cls[i]);
		vp_buf__varint9(body, 0);                /* timeout and until: not recorded */
		vp_buf__varint9(body, 0);
		vp_buf__varint9(body, 0);                /* address */
	} else {
		vp_buf__varint9(body, r->cls[i]);
		vp_buf__varint9(body, 0);                /* previous owner: not recorded */
		vp_buf__varint9(body, 0);
	}
	b_event(evs, body);
}

/* For a profile without sample times: every sample of event ev, at times spread evenly
 * over the recording (the n-th of N at start + duration * (n + 1/2) / N), the stacks'
 * samples interleaved by stepping through them with a stride prime to N, each with its
 * stack's mean weight. */
static int write_spread(const struct vp_profile *p, struct vp_buf *evs, int ev, enum kind kind, const struct refs *r,
			uint64_t t0, uint64_t dur)
{
	uint64_t n = 0, total = 0;
	struct vp_buf body = { 0 };
	const uint32_t *trace = r->trace[kind];
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
		put_event(evs, &body, r, kind, i, t0 + (uint64_t)((double)dur * ((double)k + 0.5) / (double)total), each,
			  each);
	}
	free(order);
	free(body.b);
	return evs->err;
}

static int jev_cmp(const void *a, const void *b)
{
	const struct jev *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->kind != y->kind ? (int)x->kind - (int)y->kind : (x->stack > y->stack) - (x->stack < y->stack);
}

/* The events of the sample records (p->spans) of the kinds' events kev[], each at its own
 * time, into *out sorted by start (malloc'd, *n of them): instants for CPU samples and
 * allocations, intervals for lock waits and for off-CPU intervals recorded one by one. */
static int timed_events(const struct vp_profile *p, const int kev[K__COUNT], const struct refs *r, struct jev **out,
			size_t *n)
{
	struct jev *v = malloc((p->nspans + 1) * sizeof(*v));
	size_t m = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < p->nspans; i++) {
		const struct vp_sample_span *x = &p->spans[i];
		int k;
		for (k = 0; k < K__COUNT && !(kev[k] >= 0 && x->event == kev[k]); k++)
			;
		if (k == K__COUNT || x->stack >= p->nstacks || !r->trace[k][x->stack])
			continue;
		bool interval = k == K_LOCK || k == K_OFF;
		if (interval && !(x->flags & VP_SPAN_ONE_INTERVAL))
			continue;   /* a sum of short intervals: no start of its own */
		uint64_t dur = interval ? x->weight : 0;
		v[m++] = (struct jev){ .start = x->end > dur ? x->end - dur : 0, .dur = dur, .weight = x->weight,
				       .stack = x->stack, .kind = (uint8_t)k };
	}
	qsort(v, m, sizeof(*v), jev_cmp);
	*out = v;
	*n = m;
	return 0;
}

static int find_event(const struct vp_profile *p, const char *name)
{
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, name))
			return e;
	return -1;
}

/* A launched JVM's command line, as the recorder kept it (meta "command", arguments
 * joined by spaces): the JVM's options before the main class (or -jar FILE, -m MODULE),
 * the application's from it on, as JFR's jvmArguments and javaArguments. False when the
 * command is not a java launcher's. */
static bool java_command(const char *cmd, char *jvm, size_t jl, char *app, size_t al)
{
	const char *sp = strchr(cmd, ' ');
	size_t n0 = sp ? (size_t)(sp - cmd) : strlen(cmd);
	if (n0 < 4 || strncmp(cmd + n0 - 4, "java", 4) || (n0 > 4 && cmd[n0 - 5] != '/'))
		return false;
	static const char *const with_value[] = { "-cp", "-classpath", "--class-path", "-p", "--module-path",
						  "--upgrade-module-path", "--add-modules", "--limit-modules",
						  "--add-reads", "--add-exports", "--add-opens", "--patch-module",
						  "--enable-native-access", NULL };
	size_t jo = 0;
	jvm[0] = app[0] = '\0';
	const char *q = sp;
	while (q && *q == ' ') {
		const char *tok = q + 1, *e = strchr(tok, ' ');
		size_t tl = e ? (size_t)(e - tok) : strlen(tok);
		if (!tl || tok[0] != '-' || (tl == 4 && !strncmp(tok, "-jar", 4)) ||
		    (tl == 2 && !strncmp(tok, "-m", 2)) || (tl == 8 && !strncmp(tok, "--module", 8))) {
			snprintf(app, al, "%s", tok);
			break;
		}
		bool value = false;
		for (int k = 0; with_value[k]; k++)
			value |= strlen(with_value[k]) == tl && !strncmp(tok, with_value[k], tl);
		if (value && e) {   /* the option and its value */
			const char *e2 = strchr(e + 1, ' ');
			tl = e2 ? (size_t)(e2 - tok) : strlen(tok);
			e = e2;
		}
		if (jo < jl)
			jo += (size_t)snprintf(jvm + jo, jl - jo, "%s%.*s", jo ? " " : "", (int)tl, tok);
		q = e;
	}
	return true;
}

/* The environment events, at the chunk's start: one jdk.JVMInformation per JVM the
 * session knows by name (meta "jvm.PID.vm", from its code map), jdk.OSInformation,
 * jdk.CPUInformation, jdk.ActiveRecording, and jdk.ActiveSetting for each event type the
 * file holds. Only what the session recorded: a value it has no record of is left empty. */
static void environment(const struct vp_profile *p, struct vp_buf *evs, uint64_t t0, uint64_t real0, uint64_t dur,
			const bool types[K__COUNT], const bool off_types[2])
{
	struct vp_buf b = { 0 };
	char s1[4096], s2[4096], s3[512];
	const char *target = vp_profile__meta(p, "target"), *cmd = vp_profile__meta(p, "command");
	size_t njvm = 0;
	for (size_t i = 0; i < p->nmeta; i++)
		njvm += !strncmp(p->meta[i].key, "jvm.", 4) && strstr(p->meta[i].key, ".vm");
	for (size_t i = 0; i < p->nmeta; i++) {
		const char *k = p->meta[i].key, *vm = p->meta[i].value;
		char *end;
		unsigned long pid = strncmp(k, "jvm.", 4) ? 0 : strtoul(k + 4, &end, 10);
		if (!pid || strcmp(end, ".vm"))
			continue;
		/* "OpenJDK 64-Bit Server VM 17.0.13+11-Debian-2": the name, then the version. */
		const char *sp = strrchr(vm, ' ');
		const char *mach = vp_profile__meta(p, "machine");
		b.len = 0;
		vp_buf__varint9(&b, T_JVM_INFO);
		vp_buf__varint9(&b, t0);
		snprintf(s3, sizeof(s3), "%.*s", sp ? (int)(sp - vm) : (int)strlen(vm), vm);
		b_str(&b, s3);
		snprintf(s2, sizeof(s2), "%s (%s) for linux-%s", s3, sp ? sp + 1 : "", mach && !strcmp(mach, "x86_64") ? "amd64"
										    : mach ? mach : "?");
		b_str(&b, s2);
		/* The command line is the launched command's: one JVM launched. */
		if (njvm == 1 && target && !strcmp(target, "launch") && cmd && java_command(cmd, s1, sizeof(s1), s2, sizeof(s2))) {
			b_str(&b, s1);
			b_str(&b, NULL);            /* settings file arguments: not recorded */
			b_str(&b, s2);
		} else {
			b_str(&b, NULL);
			b_str(&b, NULL);
			b_str(&b, NULL);
		}
		/* The JVM's start: its agent's load (launched with it), on the wall clock. */
		snprintf(s3, sizeof(s3), "jvm.%lu.start_ns", pid);
		uint64_t js = meta_u64(p, s3);
		vp_buf__varint9(&b, js && js + real0 >= t0 ? (js + real0 - t0) / 1000000 : 0);
		vp_buf__varint9(&b, pid);
		b_event(evs, &b);
	}
	const char *kernel = vp_profile__meta(p, "kernel"), *mach = vp_profile__meta(p, "machine");
	const char *hv = vp_profile__meta(p, "probe.hypervisor"), *vmm = vp_profile__meta(p, "probe.hypervisor.vmm");
	if (kernel) {
		int o = snprintf(s1, sizeof(s1), "uname: Linux %s %s", kernel, mach ? mach : "");
		if (hv && o > 0 && (size_t)o < sizeof(s1))
			snprintf(s1 + o, sizeof(s1) - (size_t)o, "\nvirtualization: %s%s%s", hv, vmm ? ", " : "", vmm ? vmm : "");
		b.len = 0;
		vp_buf__varint9(&b, T_OS_INFO);
		vp_buf__varint9(&b, t0);
		b_str(&b, s1);
		b_event(evs, &b);
	}
	const char *vendor = vp_profile__meta(p, "probe.cpu.vendor"), *model = vp_profile__meta(p, "probe.cpu.model");
	const char *ncpus = vp_profile__meta(p, "ncpus");
	if (vendor || model || ncpus) {
		snprintf(s1, sizeof(s1), "%s%s%s", vendor ? vendor : "", vendor && model ? " " : "", model ? model : "");
		snprintf(s2, sizeof(s2), "%s vCPUs%s%s; sockets and cores not recorded", ncpus ? ncpus : "?",
			 hv ? " under " : "", hv ? hv : "");
		b.len = 0;
		vp_buf__varint9(&b, T_CPU_INFO);
		vp_buf__varint9(&b, t0);
		b_str(&b, s1);
		b_str(&b, s2);
		vp_buf__varint9(&b, 0);             /* sockets, cores: not recorded */
		vp_buf__varint9(&b, 0);
		vp_buf__varint9(&b, ncpus ? strtoull(ncpus, NULL, 10) : 0);
		b_event(evs, &b);
	}
	b.len = 0;
	vp_buf__varint9(&b, T_ACTIVE_RECORDING);
	vp_buf__varint9(&b, t0);
	vp_buf__varint9(&b, 0);                     /* duration */
	vp_buf__varint9(&b, 0);                     /* no thread, no stack */
	vp_buf__varint9(&b, 0);
	vp_buf__varint9(&b, 1);                     /* id */
	const char *cl = vp_profile__meta(p, "cmdline");
	snprintf(s3, sizeof(s3), "viprof %s", cl ? cl : "record");
	b_str(&b, s3);
	b_str(&b, NULL);                            /* destination: a session directory, not a file */
	vp_buf__varint9(&b, 0);                     /* max age, flush interval, max size: none */
	vp_buf__varint9(&b, 0);
	vp_buf__varint9(&b, 0);
	vp_buf__varint9(&b, real0 / 1000000);
	vp_buf__varint9(&b, dur / 1000000);
	b_event(evs, &b);

	/* The settings of each event type written: what viprof recorded it with. */
	struct { int type; bool on; const char *name; char value[64]; } set[32];
	int ns = 0;
#define SET(t, on_, n, ...) do { if (ns < 32) { set[ns].type = (t); set[ns].on = (on_); set[ns].name = (n); \
	snprintf(set[ns].value, sizeof(set[ns].value), __VA_ARGS__); ns++; } } while (0)
	const char *lock_ns = vp_profile__meta(p, "lock.threshold_ns"), *alloc = vp_profile__meta(p, "alloc.interval_bytes");
	const char *split = vp_profile__meta(p, "offcpu.split_ns");
	SET(T_EXECUTION_SAMPLE, types[K_CPU], "enabled", "%s", types[K_CPU] ? "true" : "false");
	SET(T_ALLOCATION_SAMPLE, types[K_ALLOC], "enabled", "%s", types[K_ALLOC] ? "true" : "false");
	if (alloc)
		SET(T_ALLOCATION_SAMPLE, types[K_ALLOC], "interval", "%s bytes", alloc);
	for (int t = T_MONITOR_ENTER; t <= T_THREAD_PARK; t++) {
		SET(t, types[K_LOCK], "enabled", "%s", types[K_LOCK] ? "true" : "false");
		if (lock_ns)
			SET(t, types[K_LOCK], "threshold", "%s ns", lock_ns);
	}
	for (int k = 0; k < 2; k++) {
		int t = k ? T_THREAD_RUNNABLE : T_THREAD_BLOCKED;
		SET(t, off_types[k], "enabled", "%s", off_types[k] ? "true" : "false");
		if (split)
			SET(t, off_types[k], "threshold", "%s ns", split);
	}
#undef SET
	for (int i = 0; i < ns; i++) {
		b.len = 0;
		vp_buf__varint9(&b, T_ACTIVE_SETTING);
		vp_buf__varint9(&b, t0);
		vp_buf__varint9(&b, 0);
		vp_buf__varint9(&b, 0);
		vp_buf__varint9(&b, 0);
		vp_buf__varint9(&b, (uint64_t)set[i].type);
		b_str(&b, set[i].name);
		b_str(&b, set[i].value);
		b_event(evs, &b);
		if (set[i].on && !strcmp(set[i].name, "enabled")) {
			b.len = 0;
			vp_buf__varint9(&b, T_ACTIVE_SETTING);
			vp_buf__varint9(&b, t0);
			vp_buf__varint9(&b, 0);
			vp_buf__varint9(&b, 0);
			vp_buf__varint9(&b, 0);
			vp_buf__varint9(&b, (uint64_t)set[i].type);
			b_str(&b, "stackTrace");
			b_str(&b, "true");
			b_event(evs, &b);
		}
	}
	if (b.err && !evs->err)
		evs->err = b.err;
	free(b.b);
}

/* A thread of the Thread pool: its index + 1 is its id. A thread is named once in the
 * pool, by the name most of its stacks' samples carry: a JVM thread starts with the
 * launcher's name ("java") and names itself a moment later, so the first name seen may
 * be the inherited one (under load, a sleeper's first waits were). */
struct thr {
	uint32_t pid, tid;
	const char *comm;
	uint64_t n;              /* samples under comm */
	const char *alt;         /* the other name seen, and its samples */
	uint64_t altn;
};

/* Counts samples under name for t, and keeps the name with the most. */
static void thr_name(struct thr *t, const char *name, uint64_t samples)
{
	if (!strcmp(t->comm, name)) {
		t->n += samples;
		return;
	}
	if (!t->alt || strcmp(t->alt, name)) {
		if (t->alt && t->altn >= samples)
			return;   /* a third name with fewer samples than the second: not kept */
		t->alt = name;
		t->altn = 0;
	}
	t->altn += samples;
	if (t->altn > t->n) {
		const char *c = t->comm;
		uint64_t cn = t->n;
		t->comm = t->alt;
		t->n = t->altn;
		t->alt = c;
		t->altn = cn;
	}
}

/* Stack traces, classes, methods and threads of every stack an event uses. The
 * allocation and lock stacks end in the class (the profile's leaf frame), which JFR
 * has as a field of the event rather than as a frame; an off-CPU stack in its state
 * ("[blocked: sleep]"), a field of its event too. */
static int collect_stacks(struct jw *w, const int kev[K__COUNT], const bool *exact, struct refs *r, bool types[K__COUNT],
			  bool off_types[2], struct thr **th, size_t *nth)
{
	const struct vp_profile *p = w->p;
	size_t thcap = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool used = false;
		for (int k = 0; k < K__COUNT; k++) {
			if (kev[k] < 0 || !s->samples[kev[k]] || (k == K_OFF && !exact[i]))
				continue;
			used = true;
			bool leaf_class = k != K_CPU && s->nframes > 0;
			if (!(r->trace[k][i] = trace_key(w, s, s->nframes - (leaf_class ? 1 : 0))))
				return -ENOMEM;
			if (k == K_OFF) {
				const char *st = s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "[off-cpu]";
				r->state[i] = st[0] == '[' ? st : "[off-cpu]";
				off_types[!strncmp(r->state[i], "[runnable", 9)] = true;
			} else if (leaf_class) {
				char jn[1024];
				internal_class(p->frames[s->frames[s->nframes - 1]].name, jn, sizeof(jn));
				if (!(r->cls[i] = class_key(w, jn)))
					return -ENOMEM;
			}
			types[k] = true;
			if (k == K_LOCK)
				for (uint32_t f = 0; f < s->nframes; f++)
					r->park[i] |= !strncmp(p->frames[s->frames[f]].name,
							    "java.util.concurrent.locks.LockSupport.park", 43) ||
						   !strncmp(p->frames[s->frames[f]].name, "jdk.internal.misc.Unsafe.park", 29);
		}
		if (!used)
			continue;
		size_t t;
		for (t = 0; t < *nth && !((*th)[t].pid == s->pid && (*th)[t].tid == s->tid); t++)
			;
		const char *name = s->comm && *s->comm ? s->comm : "[unknown]";
		uint64_t ns = 0;
		for (int e = 0; e < p->nevents; e++)
			ns += s->samples[e];
		if (t == *nth) {
			if (vp_grow((void **)th, &thcap, *nth + 1, sizeof(**th)))
				return -ENOMEM;
			(*th)[(*nth)++] = (struct thr){ s->pid, s->tid, name, ns, NULL, 0 };
		} else {
			thr_name(&(*th)[t], name, ns);
		}
		r->thread[i] = (uint32_t)t + 1;
	}
	return 0;
}

/* The checkpoint: every constant pool. */
static void checkpoint(struct vp_buf *cp, const struct jw *w, const struct thr *th, size_t nth, uint64_t t0)
{
	vp_buf__varint9(cp, 1);          /* type: checkpoint */
	vp_buf__varint9(cp, t0);
	vp_buf__varint9(cp, 0);          /* duration */
	vp_buf__varint9(cp, 0);          /* delta to the previous checkpoint: none */
	vp_buf__u8(cp, 0);           /* a generic checkpoint, not a flush */
	vp_buf__varint9(cp, 8);          /* pools */
	vp_buf__varint9(cp, T_THREAD_STATE);
	vp_buf__varint9(cp, 1);
	vp_buf__varint9(cp, 1);
	b_str(cp, "STATE_RUNNABLE");
	vp_buf__varint9(cp, T_FRAME_TYPE);
	vp_buf__varint9(cp, 4);
	for (int k = FT_INTERPRETED; k <= FT_NATIVE; k++) {
		vp_buf__varint9(cp, (uint64_t)k);
		b_str(cp, frame_types[k]);
	}
	vp_buf__varint9(cp, T_THREAD);
	vp_buf__varint9(cp, nth);
	for (size_t k = 0; k < nth; k++) {
		vp_buf__varint9(cp, k + 1);
		b_str(cp, th[k].comm);
		vp_buf__varint9(cp, th[k].tid);
		b_str(cp, th[k].comm);
		vp_buf__varint9(cp, th[k].tid);
		vp_buf__varint9(cp, 0);      /* no thread group */
	}
	vp_buf__varint9(cp, T_SYMBOL);
	vp_buf__varint9(cp, w->syms.n + w->pkgs.n);
	for (size_t k = 0; k < w->syms.n; k++) {
		vp_buf__varint9(cp, k + 1);
		b_str(cp, w->syms.v[k]);
	}
	/* Package names are symbols too, numbered after the others. */
	for (size_t k = 0; k < w->pkgs.n; k++) {
		vp_buf__varint9(cp, w->syms.n + k + 1);
		b_str(cp, w->pkgs.v[k]);
	}
	vp_buf__varint9(cp, T_PACKAGE);
	vp_buf__varint9(cp, w->pkgs.n);
	for (size_t k = 0; k < w->pkgs.n; k++) {
		vp_buf__varint9(cp, k + 1);
		vp_buf__varint9(cp, w->syms.n + k + 1);
		vp_buf__varint9(cp, 0);      /* no module */
		vp_buf__u8(cp, 1);
	}
	vp_buf__varint9(cp, T_CLASS);
	vp_buf__varint9(cp, w->classes.n);
	for (size_t k = 0; k < w->classes.n; k++) {
		vp_buf__varint9(cp, k + 1);
		vp_buf__varint9(cp, 0);      /* no class loader */
		vp_buf__varint9(cp, w->cls_sym[k] + 1);
		vp_buf__varint9(cp, w->cls_pkg[k] + 1);
		vp_buf__varint9(cp, 0);
		vp_buf__u8(cp, w->cls_hidden[k]);
	}
	vp_buf__varint9(cp, T_METHOD);
	vp_buf__varint9(cp, w->nmethods);
	vp_buf__put(cp, w->methods.b, w->methods.len);
	vp_buf__varint9(cp, T_STACK_TRACE);
	vp_buf__varint9(cp, w->ntraces);
	vp_buf__put(cp, w->traces.b, w->traces.len);
}

/* The chunk's span: the recording's, widened to hold every event (a wait that began before the
 * window opened keeps its real start). jevs are in time order. */
static void widen_window(const struct jev *jevs, size_t njevs, uint64_t *t0, uint64_t *dur, uint64_t *real0)
{
	if (!njevs)
		return;
	uint64_t end = *t0 + *dur;
	for (size_t i = 0; i < njevs; i++)
		if (jevs[i].start + jevs[i].dur > end)
			end = jevs[i].start + jevs[i].dur;
	if (jevs[0].start < *t0) {
		*real0 -= *real0 > *t0 - jevs[0].start ? *t0 - jevs[0].start : *real0;
		*t0 = jevs[0].start;
	}
	*dur = end - *t0;
}

/* The chunk header: positions are from the chunk's start, the header's 68 bytes included. */
static void chunk_header(struct vp_buf *chunk, uint64_t size, uint64_t cp_pos, uint64_t meta_pos, uint64_t real0, uint64_t dur,
			 uint64_t t0)
{
	vp_buf__put(chunk, "FLR", 4);
	vp_buf__be(chunk, 2, 2);
	vp_buf__be(chunk, 1, 2);
	vp_buf__be(chunk, size, 8);
	vp_buf__be(chunk, cp_pos, 8);
	vp_buf__be(chunk, meta_pos, 8);
	vp_buf__be(chunk, real0, 8);
	vp_buf__be(chunk, dur, 8);
	vp_buf__be(chunk, t0, 8);
	vp_buf__be(chunk, 1000000000ull, 8);   /* ticks are CLOCK_MONOTONIC ns */
	vp_buf__be(chunk, 3, 4);                /* varint integers, final chunk */
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
	/* The CPU samples: the event asked for, or the first CPU one when that is alloc, lock
	 * or off-cpu, which have events of their own and are always written when recorded. */
	int alloc_ev = find_event(p, "alloc"), lock_ev = find_event(p, "lock"), off_ev = find_event(p, "off-cpu");
	int cpu_ev = ev == alloc_ev || ev == lock_ev || ev == off_ev ? -1 : ev;
	for (int e = 0; cpu_ev < 0 && e < p->nevents; e++)
		if (e != alloc_ev && e != lock_ev && e != off_ev && !vp_jfr_refuses_event(p->events[e].name))
			cpu_ev = e;
	/* Off-CPU intervals have events only where their times were recorded one by one. */
	bool timed = p->nspans > 0;
	if (!timed)
		off_ev = -1;
	struct jw w = { .p = p };
	struct vp_strtab meta = { 0 };
	struct vp_buf cp = { 0 }, body = { 0 }, evs = { 0 }, chunk = { 0 }, mev = { 0 }, cev = { 0 };
	struct refs r = { 0 };
	struct jev *jevs = NULL;
	size_t njevs = 0;
	bool *exact = NULL, types[K__COUNT] = { false }, off_types[2] = { false };
	struct thr *th = NULL;
	size_t nth = 0;
	const int kev[K__COUNT] = { cpu_ev, alloc_ev, lock_ev, off_ev };

	w.frame_method = calloc(p->nframes + 1, sizeof(*w.frame_method));
	r.thread = calloc(p->nstacks + 1, sizeof(*r.thread));
	r.cls = calloc(p->nstacks + 1, sizeof(*r.cls));
	r.park = calloc(p->nstacks + 1, sizeof(*r.park));
	r.state = calloc(p->nstacks + 1, sizeof(*r.state));
	exact = calloc(p->nstacks + 1, sizeof(*exact));
	bool nomem = !w.frame_method || !r.thread || !r.cls || !r.park || !r.state || !exact;
	for (int k = 0; k < K__COUNT; k++)
		nomem |= !(r.trace[k] = calloc(p->nstacks + 1, sizeof(*r.trace[k])));
	if (nomem)
		goto cleanup;
	/* The off-CPU stacks with an interval recorded one by one: only those become events. */
	for (size_t i = 0; off_ev >= 0 && i < p->nspans; i++)
		if (p->spans[i].event == off_ev && (p->spans[i].flags & VP_SPAN_ONE_INTERVAL) && p->spans[i].stack < p->nstacks)
			exact[p->spans[i].stack] = true;

	if (collect_stacks(&w, kev, exact, &r, types, off_types, &th, &nth))
		goto cleanup;

	/* The events in time order, and the chunk's span (widen_window). */
	/* The recording's window: from where sampling began (start_monotonic_ns is the
	 * recorder's start, before its setup) for duration_ns. */
	uint64_t t0 = meta_u64(p, "start_monotonic_ns"), dur = meta_u64(p, "duration_ns");
	uint64_t real0 = meta_u64(p, "start_realtime_ns"), w0 = meta_u64(p, "window.start_monotonic_ns");
	if (w0 > t0) {
		real0 += w0 - t0;
		t0 = w0;
	}
	if (timed && (err = timed_events(p, kev, &r, &jevs, &njevs)))
		goto cleanup;
	err = -ENOMEM;
	widen_window(jevs, njevs, &t0, &dur, &real0);

	checkpoint(&cp, &w, th, nth, t0);
	if ((err = cp.err ? cp.err : w.methods.err ? w.methods.err : w.traces.err))
		goto cleanup;
	err = -ENOMEM;

	environment(p, &evs, t0, real0, dur, types, off_types);
	if (timed) {
		for (size_t i = 0; i < njevs; i++)
			put_event(&evs, &body, &r, (enum kind)jevs[i].kind, jevs[i].stack, jevs[i].start, jevs[i].dur,
				  jevs[i].weight);
		body.len = 0;
	} else {
		for (int k = 0; k < K__COUNT; k++)
			if (kev[k] >= 0 && (err = write_spread(p, &evs, kev[k], (enum kind)k, &r, t0, dur)))
				goto cleanup;
	}
	if ((err = evs.err))
		goto cleanup;
	err = -ENOMEM;

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
	chunk_header(&chunk, size, cp_pos, meta_pos, real0, dur, t0);
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
	free(r.thread);
	free(r.cls);
	free(r.park);
	free(r.state);
	free(exact);
	free(jevs);
	for (int k = 0; k < K__COUNT; k++)
		free(r.trace[k]);
	return err;
}
