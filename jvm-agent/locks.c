/* Contended locks (record -e lock): see locks.h.
 *
 * java.util.concurrent. Every j.u.c wait ends in the native jdk.internal.misc.Unsafe.park
 * (LockSupport.park*, with the blocker in Thread.parkBlocker for the park's duration).
 * The agent binds its own function to that native with JNI RegisterNatives and calls the
 * JDK's from it, timing that call alone: no JVMTI event, no breakpoint, no VM operation
 * on the way in or out. Issue 32: a breakpoint at LockSupport.park and a FramePop read
 * the blocker with GetLocalObject (a VM operation per park), which made ReentrantLock
 * waits 1.6-1.8 times longer than JFR measured them, most of them inside the agent. The
 * blocker, the lock's class and the stack are read after the park returned, and only
 * for a wait of at least the threshold; before that the wrapper reads the clock twice.
 * RegisterNatives needs no capability, so a JVM the agent attaches to later gets it too.
 *
 * The JDK's own function: JNI offers no way to read a native's binding. The agent looks
 * Unsafe_Park up in libjvm.so's own symbol table (.symtab, which Debian's and Temurin's
 * builds keep), checked against the code in memory. Where libjvm is stripped it catches
 * the function the way the JDK hands it over: for the duration of one call of
 * Unsafe.registerNatives() (which only binds Unsafe's natives again, to the same
 * functions) RegisterNatives in the JNI function table is the agent's, which notes
 * Unsafe's park and binds nothing (HotSpot swaps the table at a safepoint, copying it
 * four bytes at a time, so a native thread calling RegisterNatives at that instant could
 * read a torn pointer: hence the symbol table first). The wrapper is bound once per JVM and stays: binding a
 * native again leaves its compiled wrapper in the code cache (JDK-8369219); with locks
 * off it only calls through, one load and one branch per park.
 *
 * Monitors: MonitorContendedEnter notes the time, MonitorContendedEntered queues the
 * wait; both are posted on the contended path only, and can_generate_monitor_events is
 * granted to an agent loaded at any time. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE      /* dladdr */
#endif
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jvm-agent/locks.h"
#include "maps/codemap_format.h"

/* ParkHook.class (jvm-agent/ParkHook.java), embedded at build time (class_embed.cmake). */
extern const unsigned char vp_park_hook_class[];
extern const unsigned long vp_park_hook_class_len;

#define LOCK_MAX_FRAMES 128

/* locks=NS: waits at least NS long are recorded; -1: off. Read by every park. */
static _Atomic int64_t threshold = -1;
static __thread uint64_t tl_monitor_start;

typedef void(JNICALL *park_fn)(JNIEnv *, jobject, jboolean, jlong);
typedef jint(JNICALL *register_fn)(JNIEnv *, jclass, const JNINativeMethod *, jint);

static struct vp_locks_host host;     /* set once by vp_locks__start, before any callback */

/* Set once, before the wrapper is bound (park_bind), and never again. */
static park_fn park_jdk;            /* the JDK's Unsafe.park */
static jclass unsafe_class;         /* global reference */
static jfieldID park_blocker;       /* java.lang.Thread.parkBlocker (read atomically: vthread.c) */
static jmethodID support[6];        /* LockSupport's park methods: the frame above Unsafe.park */
static register_fn register_jdk;    /* RegisterNatives, while park_bind catches Unsafe's */
static atomic_int park_tried;       /* one try per JVM, whichever thread comes first */
static bool park_installed;         /* install0 bound it */
static const char *park_how;        /* where park_jdk came from */

/* Queues LOCK_SAMPLE: a wait from start to end, the waiting stack fr[0..n) innermost
 * first, the lock's class signature sig. */
static void queue_lock(uint64_t start, uint64_t end, const char *sig, const jvmtiFrameInfo *fr, jint n)
{
	size_t sl = sig ? strnlen(sig, 1024) : 0;
	uint64_t waited = end > start ? end - start : 0;
	host.lock();
	/* Checked again under the queue's lock: a session that turned locks off before its
	 * switch (vp_locks__apply) gets none of them, not even from a thread preempted above. */
	struct vp_cm_alloc_sample *b = atomic_load_explicit(&threshold, memory_order_relaxed) < 0 ? NULL :
		host.q_reserve(VP_CM_LOCK_SAMPLE, end, sizeof(*b) + (size_t)n * sizeof(struct vp_cm_alloc_frame) + sl);
	if (b) {
		struct vp_cm_alloc_frame *f = (struct vp_cm_alloc_frame *)(b + 1);
		b->tid = (uint32_t)syscall(SYS_gettid);
		b->nframes = (uint16_t)n;
		b->class_len = (uint16_t)sl;
		b->size = b->weight = waited;
		for (jint i = 0; i < n; i++)
			f[i] = (struct vp_cm_alloc_frame){ .method_id = (uint64_t)(uintptr_t)fr[i].method,
							   .bci = (int32_t)fr[i].location };
		memcpy(f + n, sig, sl);
	}
	host.unlock_notify();
}

/* The class signature of obj into buf ("" when it has none). */
static void class_of(jvmtiEnv *jvmti, JNIEnv *jni, jobject obj, char *buf, size_t len)
{
	char *sig = NULL;
	buf[0] = '\0';
	if (!obj)
		return;
	jclass k = (*jni)->GetObjectClass(jni, obj);
	if (k && (*jvmti)->GetClassSignature(jvmti, k, &sig, NULL) == JVMTI_ERROR_NONE && sig)
		snprintf(buf, len, "%s", sig);
	if (sig)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
	if (k)
		(*jni)->DeleteLocalRef(jni, k);
}

static bool recording(void)
{
	return atomic_load_explicit(&threshold, memory_order_relaxed) >= 0 && host.disabled && !*host.disabled;
}

/* ---- synchronized ---- */

/* The thread blocks on a monitor another thread holds ... */
static void JNICALL cb_monitor_enter(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jobject object)
{
	(void)jvmti, (void)jni, (void)thread, (void)object;
	tl_monitor_start = host.now_ns();
}

/* ... and has it now: the wait is over. */
static void JNICALL cb_monitor_entered(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jobject object)
{
	uint64_t start = tl_monitor_start, end = host.now_ns();
	jvmtiFrameInfo fr[LOCK_MAX_FRAMES];
	jint n = 0;
	char sig[256];

	(void)thread;
	tl_monitor_start = 0;
	if (!start || !recording() || (int64_t)(end - start) < atomic_load_explicit(&threshold, memory_order_relaxed))
		return;
	class_of(jvmti, jni, object, sig, sizeof(sig));
	if ((*jvmti)->GetStackTrace(jvmti, NULL, 0, LOCK_MAX_FRAMES, fr, &n) != JVMTI_ERROR_NONE)
		n = 0;
	queue_lock(start, end, sig, fr, n);
}

void vp_locks__callbacks(jvmtiEventCallbacks *cb)
{
	cb->MonitorContendedEnter = cb_monitor_enter;
	cb->MonitorContendedEntered = cb_monitor_entered;
}

/* ---- java.util.concurrent ---- */

/* Is m one of LockSupport's park methods? */
static bool is_support(jmethodID m)
{
	for (size_t i = 0; i < sizeof(support) / sizeof(support[0]); i++)
		if (support[i] && m == support[i])
			return true;
	return false;
}

/* After a park of at least the threshold, on the parked thread, back in its native frame
 * (JNI and JVMTI calls allowed; local references die with the frame): the blocker, which
 * LockSupport clears only after Unsafe.park returned, its class, the stack. A park
 * without a blocker (LockSupport.park(), a sleep of the JDK's own) is no lock wait. */
static void park_record(JNIEnv *jni, uint64_t start, uint64_t end)
{
	jvmtiEnv *jvmti = host.jvmti;
	jthread self = NULL;
	jvmtiFrameInfo fr[LOCK_MAX_FRAMES + 1];
	jint n = 0;
	char sig[256];

	/* An exception pending (the park was interrupted into one): JNI allows no call. */
	if ((*jni)->ExceptionCheck(jni) || (*jvmti)->GetCurrentThread(jvmti, &self) != JVMTI_ERROR_NONE || !self)
		return;
	jobject blocker = (*jni)->GetObjectField(jni, self, __atomic_load_n(&park_blocker, __ATOMIC_ACQUIRE));
	(*jni)->DeleteLocalRef(jni, self);
	if (!blocker)
		return;
	class_of(jvmti, jni, blocker, sig, sizeof(sig));
	(*jni)->DeleteLocalRef(jni, blocker);
	/* The stack from LockSupport.park* down, as JFR's ThreadPark has it; a caller of
	 * Unsafe.park itself keeps the Unsafe.park frame, so every park stack names one. */
	if ((*jvmti)->GetStackTrace(jvmti, NULL, 0, LOCK_MAX_FRAMES + 1, fr, &n) != JVMTI_ERROR_NONE)
		n = 0;
	jint skip = n > 1 && is_support(fr[1].method) ? 1 : 0;
	if (n - skip > LOCK_MAX_FRAMES)
		n = LOCK_MAX_FRAMES + skip;
	queue_lock(start, end, sig, fr + skip, n - skip);
}

/* Bound to Unsafe.park(boolean, long): the JDK's park, timed. Runs on every park of every
 * platform thread (and pinned virtual thread): no lock, no allocation, no JVM call before
 * the JDK's function returns. */
static void JNICALL park_hook(JNIEnv *jni, jobject unsafe, jboolean absolute, jlong time)
{
	if (!recording()) {
		park_jdk(jni, unsafe, absolute, time);
		return;
	}
	uint64_t start = host.now_ns();
	park_jdk(jni, unsafe, absolute, time);
	uint64_t end = host.now_ns();
	int64_t min = atomic_load_explicit(&threshold, memory_order_relaxed);
	if (min >= 0 && end - start >= (uint64_t)min)
		park_record(jni, start, end);
}

/* Mounted again (see locks.h), on the carrier with vt current; LockSupport clears the
 * blocker only once the park returns, after this mount. The stack from LockSupport.park*
 * down, past the frames that unmounted it (VirtualThread.park, Continuation.yield). */
void vp_locks__vthread_mount(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt, uint64_t since, uint64_t t)
{
	jfieldID pb = __atomic_load_n(&park_blocker, __ATOMIC_ACQUIRE);
	int64_t min = atomic_load_explicit(&threshold, memory_order_relaxed);
	jvmtiFrameInfo fr[LOCK_MAX_FRAMES + 32];
	jint n = 0, skip = 0;
	char sig[256];

	if (!pb || !recording() || t < since || t - since < (uint64_t)min || (*jni)->ExceptionCheck(jni))
		return;
	jobject blocker = (*jni)->GetObjectField(jni, vt, pb);
	if (!blocker)
		return;
	class_of(host.jvmti, jni, blocker, sig, sizeof(sig));
	(*jni)->DeleteLocalRef(jni, blocker);
	if ((*jvmti)->GetStackTrace(jvmti, vt, 0, LOCK_MAX_FRAMES + 32, fr, &n) != JVMTI_ERROR_NONE)
		n = 0;
	while (skip < n && !is_support(fr[skip].method))
		skip++;
	if (skip == n)
		skip = 0;
	if (n - skip > LOCK_MAX_FRAMES)
		n = LOCK_MAX_FRAMES + skip;
	queue_lock(since, t, sig, fr + skip, n - skip);
}

/* RegisterNatives in the JNI function table while park_bind calls Unsafe.registerNatives:
 * notes the JDK's park and binds nothing for Unsafe; passes any other class on (another
 * thread may bind its natives meanwhile). */
static jint JNICALL register_catch(JNIEnv *jni, jclass cls, const JNINativeMethod *m, jint n)
{
	if (unsafe_class && (*jni)->IsSameObject(jni, cls, unsafe_class)) {
		for (jint i = 0; i < n; i++)
			if (m[i].name && m[i].signature && !strcmp(m[i].name, "park") && !strcmp(m[i].signature, "(ZJ)V"))
				park_jdk = (park_fn)m[i].fnPtr;
		return 0;
	}
	return register_jdk(jni, cls, m, n);
}

/* ParkHook.install0: binds the wrapper, called from ParkHook.install (boot loader). */
static void JNICALL install0(JNIEnv *jni, jclass k)
{
	JNINativeMethod m = { (char *)"park", (char *)"(ZJ)V", (void *)park_hook };
	(void)k;
	park_installed = (*jni)->RegisterNatives(jni, unsafe_class, &m, 1) == 0;
}

/* The value of symbol name in the ELF symbol table sh (strings in section sh_link), 0 if
 * absent. Every offset is checked against the file's size. */
static uint64_t elf_sym(const uint8_t *f, size_t size, const Elf64_Shdr *sh, const Elf64_Shdr *shs, uint16_t nsh,
			const char *name)
{
	if (sh->sh_link >= nsh || sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_offset > size ||
	    sh->sh_size > size - sh->sh_offset)
		return 0;
	const Elf64_Shdr *st = &shs[sh->sh_link];
	if (st->sh_offset > size || st->sh_size > size - st->sh_offset)
		return 0;
	const Elf64_Sym *s = (const Elf64_Sym *)(f + sh->sh_offset);
	const char *str = (const char *)(f + st->sh_offset);
	size_t nl = strlen(name) + 1;
	for (size_t i = 0; i < sh->sh_size / sizeof(Elf64_Sym); i++)
		if (s[i].st_name < st->sh_size && st->sh_size - s[i].st_name >= nl && !memcmp(str + s[i].st_name, name, nl) &&
		    ELF64_ST_TYPE(s[i].st_info) == STT_FUNC && s[i].st_value)
			return s[i].st_value;
	return 0;
}

/* Unsafe_Park from the .symtab of the libjvm.so file this JVM maps. The symbol's address
 * is the file's value plus the load bias that an exported function (JNI_CreateJavaVM)
 * gives; it is used only when a second export agrees with that bias and the function's
 * first 32 bytes in memory are the file's (a JDK updated on disk under a running JVM has
 * another file there). NULL when any of that fails. */
static park_fn park_from_symtab(void)
{
	static const char *const names[] = { "Unsafe_Park", "_ZL11Unsafe_ParkP7JNIEnv_P8_jobjecthl" };
	park_fn found = NULL;
	Dl_info di;
	void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
	void *create = h ? dlsym(h, "JNI_CreateJavaVM") : NULL, *created = h ? dlsym(h, "JNI_GetCreatedJavaVMs") : NULL;
	if (h)
		dlclose(h);
	if (!create || !created || !dladdr(create, &di) || !di.dli_fname)
		return NULL;
	int fd = open(di.dli_fname, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat sb;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return NULL;
	}
	size_t size = (size_t)sb.st_size;
	const uint8_t *f = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return NULL;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
	    (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size - eh->e_shoff)
		goto cleanup;
	const Elf64_Shdr *shs = (const Elf64_Shdr *)(f + eh->e_shoff);
	for (uint16_t i = 0; i < eh->e_shnum && !found; i++) {
		if (shs[i].sh_type != SHT_SYMTAB)
			continue;
		uint64_t vc = elf_sym(f, size, &shs[i], shs, eh->e_shnum, "JNI_CreateJavaVM");
		uint64_t vd = elf_sym(f, size, &shs[i], shs, eh->e_shnum, "JNI_GetCreatedJavaVMs");
		uint64_t bias = (uint64_t)(uintptr_t)create - vc;
		if (!vc || !vd || bias + vd != (uint64_t)(uintptr_t)created)
			continue;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !found; k++) {
			uint64_t v = elf_sym(f, size, &shs[i], shs, eh->e_shnum, names[k]);
			/* The section that holds it, for the bytes in the file. */
			for (uint16_t j = 0; v && j < eh->e_shnum; j++) {
				const Elf64_Shdr *s = &shs[j];
				if (s->sh_type != SHT_PROGBITS || !(s->sh_flags & SHF_EXECINSTR) || v < s->sh_addr ||
				    v + 32 > s->sh_addr + s->sh_size || s->sh_offset > size || s->sh_size > size - s->sh_offset)
					continue;
				Dl_info dv;
				void *at = (void *)(uintptr_t)(bias + v);
				if (dladdr(at, &dv) && dv.dli_fbase == di.dli_fbase &&
				    !memcmp(f + s->sh_offset + (v - s->sh_addr), at, 32))
					found = (park_fn)at;
				break;
			}
		}
	}
cleanup:
	munmap((void *)f, size);
	return found;
}

/* Binds park_hook to Unsafe.park. NULL, or what failed (for the one message). */
static const char *park_bind(jvmtiEnv *jvmti, JNIEnv *jni)
{
	static const struct { const char *name, *sig; } ls[6] = {
		{ "park", "(Ljava/lang/Object;)V" }, { "parkNanos", "(Ljava/lang/Object;J)V" },
		{ "parkUntil", "(Ljava/lang/Object;J)V" }, { "park", "()V" }, { "parkNanos", "(J)V" },
		{ "parkUntil", "(J)V" },
	};
	jniNativeInterface *table = NULL;
	jclass k;

	if (!(k = (*jni)->FindClass(jni, "jdk/internal/misc/Unsafe"))) {
		(*jni)->ExceptionClear(jni);
		if (!(k = (*jni)->FindClass(jni, "sun/misc/Unsafe")))   /* JDK 8 */
			return "it has no class jdk.internal.misc.Unsafe";
	}
	if (!(unsafe_class = (*jni)->NewGlobalRef(jni, k)))
		return "NewGlobalRef(Unsafe)";
	jmethodID reg = (*jni)->GetStaticMethodID(jni, unsafe_class, "registerNatives", "()V");
	if (!reg)
		return "it has no method Unsafe.registerNatives()";
	jclass t = (*jni)->FindClass(jni, "java/lang/Thread");
	jfieldID pb = t ? (*jni)->GetFieldID(jni, t, "parkBlocker", "Ljava/lang/Object;") : NULL;
	if (!pb)
		return "it has no field Thread.parkBlocker";
	if ((k = (*jni)->FindClass(jni, "java/util/concurrent/locks/LockSupport")))
		for (int i = 0; i < 6; i++)
			if (!(support[i] = (*jni)->GetStaticMethodID(jni, k, ls[i].name, ls[i].sig)))
				(*jni)->ExceptionClear(jni);
	(*jni)->ExceptionClear(jni);
	__atomic_store_n(&park_blocker, pb, __ATOMIC_RELEASE);   /* support[] with it */

	/* VIPROF_AGENT_PARK=natives: the other way, for its test (test-lock-jvm). */
	const char *way = getenv("VIPROF_AGENT_PARK");
	if (!(way && !strcmp(way, "natives")) && (park_jdk = park_from_symtab())) {
		park_how = "libjvm.so's symbol table";
		goto bind;
	}
	park_how = "Unsafe.registerNatives()";
	if ((*jvmti)->GetJNIFunctionTable(jvmti, &table) != JVMTI_ERROR_NONE || !table)
		return "GetJNIFunctionTable failed";
	register_jdk = table->RegisterNatives;
	table->RegisterNatives = register_catch;
	jvmtiError e = (*jvmti)->SetJNIFunctionTable(jvmti, table);
	if (e == JVMTI_ERROR_NONE) {
		(*jni)->CallStaticVoidMethod(jni, unsafe_class, reg);
		(*jni)->ExceptionClear(jni);
		table->RegisterNatives = register_jdk;
		(*jvmti)->SetJNIFunctionTable(jvmti, table);
	}
	(*jvmti)->Deallocate(jvmti, (unsigned char *)table);
	if (e != JVMTI_ERROR_NONE)
		return "SetJNIFunctionTable failed";
	if (!park_jdk)
		return "libjvm.so has no symbol table and Unsafe.registerNatives() bound no park(boolean, long)";
bind:;

	jclass hook = (*jni)->DefineClass(jni, "viprof/agent/ParkHook", NULL, (const jbyte *)vp_park_hook_class,
					  (jsize)vp_park_hook_class_len);
	if (!hook) {   /* defined already: an earlier try in this JVM got that far */
		(*jni)->ExceptionClear(jni);
		if (!(hook = (*jni)->FindClass(jni, "viprof/agent/ParkHook"))) {
			(*jni)->ExceptionClear(jni);
			return "defining viprof.agent.ParkHook in the boot class loader failed";
		}
	}
	JNINativeMethod m = { (char *)"install0", (char *)"()V", (void *)install0 };
	jmethodID install = (*jni)->GetStaticMethodID(jni, hook, "install", "()V");
	if (!install || (*jni)->RegisterNatives(jni, hook, &m, 1)) {
		(*jni)->ExceptionClear(jni);
		return "binding viprof.agent.ParkHook.install0 failed";
	}
	(*jni)->CallStaticVoidMethod(jni, hook, install);
	(*jni)->ExceptionClear(jni);
	return park_installed ? NULL : "RegisterNatives(Unsafe.park) failed";
}

void vp_locks__live(jvmtiEnv *jvmti, JNIEnv *jni)
{
	if (atomic_load(&threshold) < 0 || !jni || atomic_load(&park_tried) || atomic_exchange(&park_tried, 1))
		return;
	const char *why = "PushLocalFrame failed";
	if ((*jni)->PushLocalFrame(jni, 16) == 0) {
		why = park_bind(jvmti, jni);
		(*jni)->PopLocalFrame(jni, NULL);
	}
	(*jni)->ExceptionClear(jni);
	if (why)
		fprintf(stderr, "viprof agent: java.util.concurrent waits are not recorded in this JVM: wrapping its "
			"Unsafe.park native: %s; recording contended monitors only (async-profiler's --lock needs the same "
			"wrapper)\n", why);
	else if (host.verbose && *host.verbose)
		fprintf(stderr, "viprof agent: Unsafe.park wrapped; the JDK's function from %s\n", park_how);
}

/* ---- on and off ---- */

static const jvmtiEvent monitor_ev[] = { JVMTI_EVENT_MONITOR_CONTENDED_ENTER, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED };

void vp_locks__start(const struct vp_locks_host *h, int64_t ns)
{
	jvmtiEnv *jvmti = h->jvmti;
	char *name = NULL;
	static bool have_caps;
	jvmtiCapabilities caps = { 0 };
	jvmtiError e = JVMTI_ERROR_NONE;

	host = *h;
	atomic_store(&threshold, ns);
	if (ns < 0)
		return;
	caps.can_generate_monitor_events = 1;
	if (!have_caps && (e = (*jvmti)->AddCapabilities(jvmti, &caps)) != JVMTI_ERROR_NONE) {
		(*jvmti)->GetErrorName(jvmti, e, &name);
		fprintf(stderr, "viprof agent: contended monitors are not recorded: %s (monitor events); recording "
			"java.util.concurrent waits only\n", name ? name : "a JVMTI error");
		if (name)
			(*jvmti)->Deallocate(jvmti, (unsigned char *)name);
		return;
	}
	have_caps = true;
	for (size_t i = 0; i < sizeof(monitor_ev) / sizeof(monitor_ev[0]); i++)
		(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, monitor_ev[i], NULL);
}

void vp_locks__apply(jvmtiEnv *jvmti, JNIEnv *jni, int64_t ns, bool starting)
{
	int64_t now = atomic_load(&threshold);
	if (!starting) {
		if (ns < 0 && now >= 0) {
			atomic_store(&threshold, -1);
			for (size_t i = 0; i < sizeof(monitor_ev) / sizeof(monitor_ev[0]); i++)
				(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, monitor_ev[i], NULL);
		}
		return;
	}
	if (ns >= 0 && now < 0) {
		struct vp_locks_host h = host;   /* the agent's, as given at its setup */
		h.jvmti = jvmti;
		vp_locks__start(&h, ns);
		vp_locks__live(jvmti, jni);
	} else if (ns >= 0) {
		atomic_store(&threshold, ns);
	}
}
