/* What a thread's wait was, by name: the kernel's states and the JVM's own (see
 * sched_state.h). Pure functions, read by the loader (the state leaf frames it writes)
 * and by the wall view (report/wall.c). */
#include <stdio.h>
#include <string.h>

#include "common/session_format.h"
#include "common/steal_est.h"
#include "postproc/sched_state.h"

/* A frame of the JDK's own classes (not the application's). */
bool vp_jdk_frame(const char *name)
{
	static const char *const pkgs[] = { "java.", "jdk.", "sun.", "com.sun.", "javax.", NULL };
	for (int i = 0; pkgs[i]; i++)
		if (!strncmp(name, pkgs[i], strlen(pkgs[i])))
			return true;
	return false;
}

const char *vp_sched_state_frame(int state)
{
	switch (state) {
	case VP_SCHED_STEAL:            return "[hypervisor: steal]";
	case VP_SCHED_HV_ESTIMATED:     return VP_STEAL_EST_FRAME;
	case VP_SCHED_BLOCKED_SLEEP:    return "[blocked: sleep]";
	case VP_SCHED_BLOCKED_IO:       return "[blocked: io]";
	case VP_SCHED_BLOCKED_LOCK:     return "[blocked: lock]";
	case VP_SCHED_BLOCKED_OTHER:    return "[blocked: uninterruptible]";
	case VP_SCHED_RUNNABLE_PREEMPT: return "[runnable: preempted]";
	case VP_SCHED_RUNNABLE_WOKEN:   return "[runnable: woken]";
	case VP_SCHED_BLOCKED_FD:       return "[blocked: io wait]";
	case VP_SCHED_BLOCKED_WAIT:     return "[blocked: other wait]";
	case VP_SCHED_BLOCKED_PARK:     return "[blocked: park]";
	case VP_SCHED_BLOCKED_OBJWAIT:  return "[blocked: wait]";
	case VP_SCHED_IDLE:             return "[idle]";
	case VP_SCHED_BLOCKED_JVM:      return "[blocked: jvm]";
	default:                        return "[off-cpu: unknown state]";
	}
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The class of a method frame "pkg.Outer$Inner.method(args)": "Outer". */
static void simple_class(const char *name, char *out, size_t len)
{
	const char *paren = strchr(name, '('), *end = paren ? paren : name + strlen(name), *dot = NULL, *start = name;
	for (const char *c = name; c < end; c++)
		if (*c == '.')
			dot = c;
	if (!dot || !len)
		return;
	for (const char *c = name; c < dot; c++)
		if (*c == '.')
			start = c + 1;
	size_t n = 0;
	while (start + n < dot && start[n] != '$' && n + 1 < len)
		n++;
	memcpy(out, start, n);
	out[n] = '\0';
}

/* Frames of java.util.concurrent's parking machinery: the class a thread parks for is
 * the first caller above them. */
static bool park_machinery(const char *f)
{
	return starts(f, "java.util.concurrent.locks.LockSupport.") || starts(f, "jdk.internal.misc.Unsafe.") ||
	       starts(f, "sun.misc.Unsafe.") || starts(f, "java.util.concurrent.locks.AbstractQueuedSynchronizer") ||
	       starts(f, "java.util.concurrent.locks.AbstractQueuedLongSynchronizer") || f[0] == '[' ||
	       strchr(f, '(') == NULL;   /* native frames between the Java ones */
}

/* Sockets, pipes and files read through NIO or the classic streams. */
static bool io_frame(const char *f)
{
	return starts(f, "sun.nio.ch.") || starts(f, "java.net.") || starts(f, "java.io.FileInputStream.read") ||
	       starts(f, "java.io.RandomAccessFile.read") || starts(f, "sun.nio.fs.");
}

int vp_sched_java_state(int state, const char *const *frames, int n, char *detail, size_t len)
{
	if (len)
		detail[0] = '\0';
	/* I/O wait (in_iowait), uninterruptible sleeps and run-queue waits say what they
	 * are already; a futex, a timed sleep, a poll or another wait may be Java's. */
	if (state != VP_SCHED_BLOCKED_LOCK && state != VP_SCHED_BLOCKED_SLEEP && state != VP_SCHED_BLOCKED_FD &&
	    state != VP_SCHED_BLOCKED_WAIT)
		return state;
	for (int i = 0; i < n; i++) {
		const char *f = frames[i] ? frames[i] : "";
		if (starts(f, "java.lang.Thread.sleep") || starts(f, "JVM_Sleep"))
			return VP_SCHED_BLOCKED_SLEEP;
		if (starts(f, "java.lang.Object.wait") || starts(f, "JVM_MonitorWait") || strstr(f, "ObjectMonitor::wait"))
			return VP_SCHED_BLOCKED_OBJWAIT;
		if (strstr(f, "ObjectMonitor::enter") || strstr(f, "ObjectMonitor::EnterI") ||
		    strstr(f, "ObjectSynchronizer::enter")) {
			snprintf(detail, len, "monitor");
			return VP_SCHED_BLOCKED_LOCK;
		}
		if (starts(f, "jdk.internal.misc.Unsafe.park") || starts(f, "sun.misc.Unsafe.park") ||
		    starts(f, "java.util.concurrent.locks.LockSupport.park") || starts(f, "Unsafe_Park")) {
			for (int k = i + 1; k < n; k++)
				if (frames[k] && !park_machinery(frames[k])) {
					/* A virtual thread's socket read parks through NIO's
					 * Poller (JDK 21+): it waits for the socket, an io wait
					 * as a platform thread's poll(2) is. */
					if (io_frame(frames[k])) {
						if (len)
							detail[0] = '\0';
						return VP_SCHED_BLOCKED_FD;
					}
					simple_class(frames[k], detail, len);
					break;
				}
			return VP_SCHED_BLOCKED_PARK;
		}
		if (io_frame(f))
			return VP_SCHED_BLOCKED_FD;
		/* The first Java frame that is none of these: the wait is the native code's. */
		if (strchr(f, '(') && strchr(f, '.') && f[0] != '[' && !strstr(f, "::"))
			break;
	}
	return state;
}

/* HotSpot's thread names (JDK 8 to 25; a name is cut to 15 characters by the kernel
 * when the agent did not name the thread), by kind. */
static const char *const gc_names[] = { "GC Thread#", "G1 ", "VM Periodic Task", "ZDirector", "ZDriver", "ZStat",
					"ZUnmapper", "ZUncommitter", "ZWorker", "XDirector", "XDriver", "XStat",
					"XUncommitter", "Shenandoah", "StringDedup", "Parallel GC", "Gang worker",
					"Concurrent Mark", "Surrogate Locker", "CMS ", NULL };
static const char *const compiler_names[] = { "C1 CompilerThre", "C2 CompilerThre", "JVMCI CompilerTh",
					      "JVMCI-native Com", "Sweeper thread", "CodeCacheSweeper", NULL };
static const char *const vm_names[] = { "VM Thread", "Service Thread", "Common-Cleaner", "Signal Dispatch",
					"Reference Handl", "Finalizer", "Notification Thr", "Monitor Deflati",
					"Attach Listener", "JFR ", "JFR: ", "DestroyJavaVM", "Cleaner-", NULL };

static bool starts_any(const char *s, const char *const *prefixes)
{
	for (int i = 0; prefixes[i]; i++)
		if (starts(s, prefixes[i]))
			return true;
	return false;
}

const char *vp_jvm_thread_kind(const char *thread)
{
	if (!thread || !*thread)
		return NULL;
	/* "VM Periodic Task Thread" samples statistics for the GC and the VM: a VM thread. */
	if (starts(thread, "VM Periodic Task"))
		return "VM";
	if (starts_any(thread, gc_names))
		return "GC worker";
	if (starts_any(thread, compiler_names))
		return "compiler";
	if (starts_any(thread, vm_names))
		return "VM";
	/* viprof's own agent threads ("viprof-jvmti", "viprof-channel" when attached): they
	 * wait for the JVM's events and the recorder's messages between them. */
	if (starts(thread, "viprof-jvmti") || starts(thread, "viprof-channel"))
		return "profiler agent";
	return NULL;
}

/* The kind of a HotSpot-internal thread from the functions its stack runs in. */
static const char *internal_frames_kind(const char *f)
{
	static const char *const gc[] = { "WorkerThread::run", "GangWorker::", "ConcurrentGCThread::",
					   "G1ServiceThread::", "G1ConcurrentRefineThread::", "G1ConcurrentMarkThread::",
					   "G1PrimaryConcurrentRefineThread", "WorkerTaskDispatcher::", "ZThread::",
					   "ZWorkers::", "ShenandoahControlThread::", "ParallelScavengeHeap::", NULL };
	static const char *const comp[] = { "CompileBroker::compiler_thread_loop", "CompileQueue::get",
					     "CompileBroker::possibly_add_compiler_threads", "NMethodSweeper::", NULL };
	static const char *const vm[] = { "VMThread::run", "VMThread::wait_for_operation", "WatcherThread::",
					  "ServiceThread::", "MonitorDeflationThread::", "signal_thread_entry",
					  "JVM_WaitForReferencePendingList", "AttachListener::", "NotificationThread::",
					  "Threads::destroy_vm", NULL };
	static const char *const launcher[] = { "JLI_Launch", "ContinueInNewThread", "CallJavaMainInNewThread", NULL };
	if (starts_any(f, gc))
		return "GC worker";
	if (starts_any(f, comp))
		return "compiler";
	if (starts_any(f, vm))
		return "VM";
	if (starts_any(f, launcher))
		return "launcher";
	return NULL;
}

/* A Java frame: "pkg.Class.method(args)" (C++ frames have "::", synthetic ones '['). */
static bool java_frame(const char *f)
{
	return strchr(f, '(') && strchr(f, '.') && f[0] != '[' && !strstr(f, "::");
}

int vp_sched_jvm_state(int state, const char *thread, const char *const *frames, int n, char *detail, size_t len)
{
	if (len)
		detail[0] = '\0';
	if (state != VP_SCHED_BLOCKED_LOCK && state != VP_SCHED_BLOCKED_SLEEP && state != VP_SCHED_BLOCKED_FD &&
	    state != VP_SCHED_BLOCKED_WAIT)
		return state;
	const char *kind = vp_jvm_thread_kind(thread), *held = NULL;
	bool hotspot_wait = false;
	for (int i = 0; i < n; i++) {
		const char *f = frames[i] ? frames[i] : "";
		/* An application thread that HotSpot stopped: for a safepoint, or until the
		 * VM thread ran an operation it asked for (a GC it triggered, a deopt). */
		if (!held && (starts(f, "SafepointSynchronize::block") || starts(f, "SafepointMechanism::") ||
			      starts(f, "ThreadBlockInVM")))
			held = "safepoint";
		if (!held && starts(f, "VMThread::execute"))
			held = "VM operation";
		/* HotSpot's own locks and condition variables (ObjectMonitor, a Java
		 * monitor, is named by vp_sched_java_state before this). */
		if (starts(f, "Monitor::") || starts(f, "Mutex::") || starts(f, "os::PlatformMonitor::") ||
		    starts(f, "os::PlatformMutex::") || starts(f, "PlatformMonitor::") || starts(f, "PosixSemaphore::") ||
		    starts(f, "os::PlatformEvent::") || starts(f, "Semaphore::") || starts(f, "Parker::"))
			hotspot_wait = true;
		const char *k = internal_frames_kind(f);
		if (!kind && k)
			kind = k;
		/* Above the first Java frame the thread runs Java code: whatever waits below it
		 * was called from Java (native code keeps the kernel's state). */
		if (java_frame(f))
			break;
	}
	if (kind) {
		snprintf(detail, len, "%s", kind);
		return VP_SCHED_IDLE;
	}
	if (held) {
		snprintf(detail, len, "%s", held);
		return VP_SCHED_BLOCKED_JVM;
	}
	if (hotspot_wait)
		return VP_SCHED_BLOCKED_JVM;
	return state;
}
