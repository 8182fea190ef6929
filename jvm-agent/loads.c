/* Code loads and method names, as the agent queues and writes them
 * (jvm-agent/loads.h). */
#include "jvm-agent/loads.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/chunkfile.h"
#include "common/util.h"
#include "jvm-agent/names.h"
#include "jvm-agent/queue.h"
#include "jvm-agent/stats.h"
#include "maps/codemap_writer.h"

/* The agent thread's JNIEnv, for its local reference frames (class_names). */
static JNIEnv *agent_jni;
static __thread bool tl_agent_thread;
/* vp_loads__name_class's scratch: the ids named from one record (agent thread only). */
static uint64_t *named_ids;
static size_t named_cap;

void vp_loads__agent_thread(JNIEnv *jni)
{
	agent_jni = jni;
	tl_agent_thread = true;
}

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/* The class half of a method's names: its class signature and source file (an
 * unreadable class leaves "L?;"). Asked once per class on the agent thread, where the
 * class reference GetMethodDeclaringClass makes is freed with a local frame: that thread
 * never returns to Java, so it would pin the class (no unloading, no code reuse). In a
 * callback the JVM frees it when the callback returns. */
static void class_names(jvmtiEnv *jvmti, jmethodID m, struct mnames *out)
{
	JNIEnv *jni = tl_agent_thread ? agent_jni : NULL;
	char *csig = NULL, *file = NULL;
	jclass cls = NULL;

	if (jni && (*jni)->PushLocalFrame(jni, 8) != 0)
		jni = NULL;
	if ((*jvmti)->GetMethodDeclaringClass(jvmti, m, &cls) == JVMTI_ERROR_NONE) {
		if ((*jvmti)->GetClassSignature(jvmti, cls, &csig, NULL) != JVMTI_ERROR_NONE)
			csig = NULL;
		if ((*jvmti)->GetSourceFileName(jvmti, cls, &file) != JVMTI_ERROR_NONE)
			file = NULL;
	}
	if (jni)
		(*jni)->PopLocalFrame(jni, NULL);
	copy_str(out->klass, sizeof(out->klass), csig ? csig : "L?;");
	copy_str(out->file, sizeof(out->file), file);
	vp_java_readable_class(out->klass, out->kreadable, sizeof(out->kreadable));
	(*jvmti)->Deallocate(jvmti, (unsigned char *)csig);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)file);
}

/* The method half: the method part of the readable name and, with out's class and
 * whole set, the whole readable name (METHOD_NAME's; METHOD_NAMES holds the parts). */
static int method_names(jvmtiEnv *jvmti, jmethodID m, struct mnames *out, bool whole)
{
	char *name = NULL, *sig = NULL;
	int err = 0;

	if ((*jvmti)->GetMethodName(jvmti, m, &name, &sig, NULL) != JVMTI_ERROR_NONE) {
		err = -EINVAL;
		goto cleanup;
	}
	vp_java_readable_method(name, sig, out->mpart, sizeof(out->mpart));
	if (whole && snprintf(out->readable, sizeof(out->readable), "%s.%s", out->kreadable, out->mpart) >=
	    (int)sizeof(out->readable))
		out->readable[sizeof(out->readable) - 1] = '\0'; /* cut, as vp_java_readable_name cuts */
cleanup:
	(*jvmti)->Deallocate(jvmti, (unsigned char *)name);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
	return err;
}

/* The method's line table, at most MAX_LINES entries, as the code map's lines: JVMTI
 * memory (Deallocate it) whose entries were turned into struct vp_cm_line in place (each
 * is half the size of JVMTI's, so entry i is written over bytes already read). None when
 * the method has no lines or the capability is missing. */
static jint method_lines(jvmtiEnv *jvmti, jmethodID m, struct vp_cm_line **out)
{
	jvmtiLineNumberEntry *lines = NULL;
	jint n = 0;

	*out = NULL;
	if ((*jvmti)->GetLineNumberTable(jvmti, m, &n, &lines) != JVMTI_ERROR_NONE)
		return 0;
	n = n > MAX_LINES ? MAX_LINES : n;
	_Static_assert(2 * sizeof(struct vp_cm_line) <= sizeof(jvmtiLineNumberEntry), "lines convert in place");
	for (jint i = 0; i < n; i++) {
		struct vp_cm_line l = { .start_bci = (uint32_t)lines[i].start_location,
					.line = (uint32_t)lines[i].line_number };
		memcpy((uint8_t *)lines + (size_t)i * sizeof(l), &l, sizeof(l));
	}
	*out = (struct vp_cm_line *)(void *)lines;
	return n;
}

/* In a callback: queues METHOD_NAME for m unless one is queued or written already.
 * Names are resolved here, not later on the agent thread, because a class can unload
 * (and its jmethodIDs stop answering) before the writer gets to the record; but most
 * methods were named before they are compiled (the writer names every method of each
 * prepared class, name_ptr_methods), so this is the exception. */
static void queue_method_name(jvmtiEnv *jvmti, jmethodID m, struct mnames *scratch)
{
	uint64_t id = (uint64_t)(uintptr_t)m;
	struct vp_cm_line *lines = NULL;

	/* An id with bit 0 set is no jmethodID but a Method* that fallback_id named: JVMTI
	 * must never see it. */
	if ((id & 1) || vp_queue__named(id))
		return;
	class_names(jvmti, m, scratch);
	if (method_names(jvmti, m, scratch, true))
		return;
	jint nlines = method_lines(jvmti, m, &lines);
	vp_queue__lock();
	void *b = vp_queue__reserve(VP_CM_METHOD_NAME, now_ns(), vp_cm_method_name__size(scratch->readable, scratch->file, (uint32_t)nlines));
	if (b) {
		vp_cm_method_name__fill(b, id, scratch->readable, scratch->file, lines, (uint32_t)nlines);
		vp_queue__add_named(id);
	}
	vp_queue__unlock_notify();
	(*jvmti)->Deallocate(jvmti, (unsigned char *)lines);
}

const jvmtiCompiledMethodLoadInlineRecord *vp_loads__find_inline(const void *compile_info)
{
	const jvmtiCompiledMethodLoadRecordHeader *h = compile_info;
	for (int guard = 0; h && guard < 16; h = h->next, guard++)
		if (h->kind == JVMTI_CMLR_INLINE_INFO)
			return (const jvmtiCompiledMethodLoadInlineRecord *)h;
	return NULL;
}

/* JVMTI's inlining as the encoder reads it (maps/codemap_writer.h). */
static void inl_pc(const void *ctx, uint32_t i, uint64_t *pc, uint32_t *depth)
{
	const PCStackInfo *p = &((const jvmtiCompiledMethodLoadInlineRecord *)ctx)->pcinfo[i];

	*pc = (uint64_t)(uintptr_t)p->pc;
	*depth = p->numstackframes > 0 ? (uint32_t)p->numstackframes : 0;
}

static void inl_frame(const void *ctx, uint32_t i, uint32_t k, uint64_t *method, int32_t *bci)
{
	const PCStackInfo *p = &((const jvmtiCompiledMethodLoadInlineRecord *)ctx)->pcinfo[i];

	*method = (uint64_t)(uintptr_t)p->methods[k];
	*bci = p->bcis[k];
}

struct name_ctx {
	jvmtiEnv *jvmti;
	struct mnames *scratch;
};

static void name_fresh(void *ctx, uint64_t id)
{
	struct name_ctx *c = ctx;

	queue_method_name(c->jvmti, (jmethodID)(uintptr_t)id, c->scratch);
}

/* CompiledMethodLoad, on the Service Thread (or the thread running GenerateEvents):
 * names what has none yet (rare, queue_method_name), then queues METHOD_LOAD2 and the
 * inlining as INLINE2, encoded straight into the queue. */
void vp_loads__compiled(jvmtiEnv *jvmti, jmethodID method, jint code_size, const void *code_addr,
			const void *compile_info, uint64_t t, uint8_t level, uint8_t flags)
{
	const jvmtiCompiledMethodLoadInlineRecord *inl = vp_stats__no_inline() ? NULL : vp_loads__find_inline(compile_info);
	struct vp_cm_inl_src src = { .ctx = inl, .npcs = inl && inl->numpcs > 0 ? (uint32_t)inl->numpcs : 0,
				     .code_start = (uint64_t)(uintptr_t)code_addr, .code_size = (uint32_t)code_size,
				     .pc = inl_pc, .frame = inl_frame };
	struct vp_cm_inl_table tab;
	struct vp_cm_inl_plan plan;
	struct mnames scratch;
	struct name_ctx nc = { jvmti, &scratch };
	bool fresh;

	vp_cm_inl_table__init(&tab);
	vp_cm_inl_table__index(&tab, (uint64_t)(uintptr_t)method, &fresh);
	queue_method_name(jvmti, method, &scratch);
	size_t bound = vp_cm_inline2__plan(&tab, &src, &plan, name_fresh, &nc);

	vp_queue__lock();
	struct vp_cm_method_load2 *b = vp_queue__reserve(VP_CM_METHOD_LOAD2, t, sizeof(*b));
	if (b) {
		b->code_start = (uint64_t)(uintptr_t)code_addr;
		b->code_size = (uint32_t)code_size;
		b->level = level;
		b->flags = flags;
		b->method_id = (uint64_t)(uintptr_t)method;
	}
	if (b && plan.npcs) {
		/* Not zeroed: the bound is far above what the encoding uses, which fills every
		 * byte but the padding, cleared below. A table overflow drops the record
		 * (counted). */
		uint8_t *ib = bound ? vp_queue__reserve_raw(VP_CM_INLINE2, t, bound) : NULL;
		if (ib) {
			vp_queue__trim(ib, vp_cm_inline2__encode(ib, &src, &tab, (uint64_t)(uintptr_t)method, &plan));
		} else if (!bound) {
			vp_queue__drop();
		}
	}
	vp_queue__unlock_notify();
}

/* The writer names the methods of the METHOD_PTR records it writes, once each, straight
 * into the file: this is the agent's own thread (or the one shutting it down), so the
 * JVMTI calls cost the application nothing. A class unloaded in between leaves its
 * methods unnamed. */
int vp_loads__name_class(jvmtiEnv *jvmti, struct vp_cm_writer *w, const struct vp_record *r)
{
	static struct mnames nm;
	/* One METHOD_NAMES record: the fixed part, the class and file, the method stream. */
	static uint8_t buf[VP_MAX_RECORD_SIZE - 64];
	const struct vp_cm_method_ptrs *b = vp_record_body(r);
	const struct vp_cm_method_ptr *p = (const struct vp_cm_method_ptr *)(b + 1);
	struct vp_cm_names_enc enc;
	bool open = false;
	uint32_t named = 0;
	int err = 0;

	/* The ids named here go into the seen table under one lock per class, not one per
	 * method: the callbacks (ClassPrepare on application threads) wait less. */
	if (vp_grow((void **)&named_ids, &named_cap, b->n, sizeof(*named_ids)))
		return -ENOMEM;
	for (uint32_t i = 0; i < b->n && !err; i++) {
		jmethodID m = (jmethodID)(uintptr_t)p[i].method_id;
		struct vp_cm_line *lines;

		if (!m || vp_queue__named(p[i].method_id))
			continue;
		/* The class half once per record: all methods of a METHOD_PTR record are of
		 * one class (queue_class_ptrs). */
		if (!named)
			class_names(jvmti, m, &nm);
		if (method_names(jvmti, m, &nm, false))
			continue;
		jint nlines = method_lines(jvmti, m, &lines);
		/* Full: this record goes out, the method begins the next. */
		if (open && vp_cm_names_enc__add(&enc, p[i].method_id, nm.mpart, lines, (uint32_t)nlines)) {
			err = vp_cm_writer__put(w, VP_CM_METHOD_NAMES, r->time, buf, vp_cm_names_enc__end(&enc));
			open = false;
		}
		if (!open && !err) {
			open = !vp_cm_names_enc__begin(&enc, buf, sizeof(buf), nm.kreadable, nm.file) &&
			       !vp_cm_names_enc__add(&enc, p[i].method_id, nm.mpart, lines, (uint32_t)nlines);
		}
		(*jvmti)->Deallocate(jvmti, (unsigned char *)lines);
		named_ids[named++] = p[i].method_id;
	}
	if (open && !err)
		err = vp_cm_writer__put(w, VP_CM_METHOD_NAMES, r->time, buf, vp_cm_names_enc__end(&enc));
	if (named) {
		vp_queue__lock();
		for (uint32_t i = 0; i < named; i++)
			vp_queue__add_named(named_ids[i]);
		vp_queue__unlock();
	}
	return err;
}

