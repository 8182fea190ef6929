/* The wall view (report/wall.h) on a profile built by hand: running scaled to the
 * exact on-CPU time less steal, off-CPU split into runnable and blocked by its state
 * frame, and running + runnable + blocked + steal = wall, per stack and per thread. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "postproc/profile.h"
#include "report/wall.h"
#include "common/session_format.h"
#include "test.h"
#include "test-profile.h"

static uint32_t frame(struct vp_profile *p, const char *name, int layer)
{
	struct vp_frame f = { .name = name, .image = "", .build_id = "", .file = "", .layer = (uint8_t)layer };
	uint32_t id = vp_profile__frame(p, &f);
	ASSERT_NE(id, UINT32_MAX);
	return id;
}

static uint64_t total(const struct vp_profile *p, int e)
{
	return (uint64_t)tp_sum(p, &(struct tp_filter){ .event = e, .weight = true }, NULL, TP_EXACT, NULL);
}

/* The Java wait states (vp_sched_java_state): frames leaf first, as the loader has them. */
static void java_states(void)
{
	char d[64];
	const char *sleep17[] = { "futex_wait", "__futex_abstimed_wait_common", "os::PlatformEvent::park(long)",
				  "JVM_Sleep", "java.lang.Thread.sleep(long)", "Shop.handleRequest()", "java.lang.Thread.run()" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_LOCK, sleep17, 7, d, sizeof(d)), VP_SCHED_BLOCKED_SLEEP);
	ASSERT_STREQ(d, "");
	const char *poll[] = { "__futex_abstimed_wait_common", "Unsafe_Park", "jdk.internal.misc.Unsafe.park(boolean, long)",
			       "java.util.concurrent.locks.LockSupport.parkNanos(java.lang.Object, long)",
			       "java.util.concurrent.locks.AbstractQueuedSynchronizer$ConditionObject.awaitNanos(long)",
			       "java.util.concurrent.LinkedBlockingQueue.poll(long, java.util.concurrent.TimeUnit)",
			       "Shop.pollRequest()" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_LOCK, poll, 7, d, sizeof(d)), VP_SCHED_BLOCKED_PARK);
	ASSERT_STREQ(d, "LinkedBlockingQueue");
	const char *lock[] = { "__futex_abstimed_wait_common", "os::PlatformEvent::park()", "ObjectMonitor::EnterI(JavaThread*)",
			       "ObjectMonitor::enter(JavaThread*)", "Shop.lockRequest()" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_LOCK, lock, 5, d, sizeof(d)), VP_SCHED_BLOCKED_LOCK);
	ASSERT_STREQ(d, "monitor");
	const char *wait[] = { "__futex_abstimed_wait_common", "JVM_MonitorWait", "java.lang.Object.wait(long)" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_LOCK, wait, 3, d, sizeof(d)), VP_SCHED_BLOCKED_OBJWAIT);
	const char *nio[] = { "__poll", "Java_sun_nio_ch_Net_poll", "sun.nio.ch.Net.poll(java.io.FileDescriptor, int, long)" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_FD, nio, 3, d, sizeof(d)), VP_SCHED_BLOCKED_FD);
	/* A virtual thread's socket read (JDK 21+) parks through NIO's Poller: that is an
	 * io wait, as for a platform thread in poll(2), not "park: Poller" (issue 33). The
	 * frames are those above the unmount machinery, as the loader passes them. */
	const char *vnio[] = { "java.util.concurrent.locks.LockSupport.park()",
			       "sun.nio.ch.Poller.poll2(int, long, java.util.function.BooleanSupplier)",
			       "sun.nio.ch.Poller.poll(int, int, long, java.util.function.BooleanSupplier)",
			       "sun.nio.ch.NioSocketImpl.park(java.io.FileDescriptor, int, long)",
			       "sun.nio.ch.NioSocketImpl.read(byte[], int, int)", "java.net.Socket$SocketInputStream.read(byte[], int, int)",
			       "Shop.readRequest()" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_WAIT, vnio, 7, d, sizeof(d)), VP_SCHED_BLOCKED_FD);
	ASSERT_STREQ(d, "");
	/* A server socket's accept and a channel's read park the same way. */
	const char *vacc[] = { "jdk.internal.misc.Unsafe.park(boolean, long)", "java.util.concurrent.locks.LockSupport.park()",
			       "sun.nio.ch.NioSocketImpl.park(java.io.FileDescriptor, int, long)",
			       "sun.nio.ch.NioSocketImpl.accept(java.net.SocketImpl)", "java.net.ServerSocket.accept()" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_WAIT, vacc, 5, d, sizeof(d)), VP_SCHED_BLOCKED_FD);
	/* Native code called from Java keeps the kernel's state; so do I/O wait and run-queue waits. */
	const char *jni[] = { "__futex_abstimed_wait_common", "my_native_wait", "Shop.callNative()", "java.lang.Thread.sleep(long)" };
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_LOCK, jni, 4, d, sizeof(d)), VP_SCHED_BLOCKED_LOCK);
	ASSERT_STREQ(d, "");
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_BLOCKED_IO, sleep17, 7, d, sizeof(d)), VP_SCHED_BLOCKED_IO);
	ASSERT_EQ(vp_sched_java_state(VP_SCHED_RUNNABLE_PREEMPT, sleep17, 7, d, sizeof(d)), VP_SCHED_RUNNABLE_PREEMPT);
	ASSERT_STREQ(vp_sched_state_frame(VP_SCHED_BLOCKED_PARK), "[blocked: park]");
	ASSERT_STREQ(vp_sched_state_frame(VP_SCHED_BLOCKED_FD), "[blocked: io wait]");
}

/* The JVM's own waits (vp_sched_jvm_state, issue 33): idle, never a lock. */
static void jvm_states(void)
{
	char d[64];
	ASSERT_STREQ(vp_jvm_thread_kind("GC Thread#3"), "GC worker");
	ASSERT_STREQ(vp_jvm_thread_kind("G1 Conc#0"), "GC worker");
	ASSERT_STREQ(vp_jvm_thread_kind("C2 CompilerThre"), "compiler");   /* the kernel's 15 characters */
	ASSERT_STREQ(vp_jvm_thread_kind("C1 CompilerThread0"), "compiler");
	ASSERT_STREQ(vp_jvm_thread_kind("VM Thread"), "VM");
	ASSERT_STREQ(vp_jvm_thread_kind("VM Periodic Task Thread"), "VM");
	ASSERT_STREQ(vp_jvm_thread_kind("Monitor Deflati"), "VM");
	ASSERT_STREQ(vp_jvm_thread_kind("viprof-channel"), "profiler agent");
	ASSERT_NULL(vp_jvm_thread_kind("sleep-request-worker"));
	ASSERT_NULL(vp_jvm_thread_kind("main"));
	ASSERT_NULL(vp_jvm_thread_kind(""));
	/* A GC worker's futex wait, by its name and by its frames alone. */
	const char *gc[] = { "__futex_abstimed_wait_common", "__new_sem_wait_slow64.constprop.0", "PosixSemaphore::wait()",
			     "WorkerTaskDispatcher::worker_run_task()", "WorkerThread::run()", "Thread::call_run()" };
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_BLOCKED_LOCK, "GC Thread#0", gc, 6, d, sizeof(d)), VP_SCHED_IDLE);
	ASSERT_STREQ(d, "GC worker");
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_BLOCKED_LOCK, "renamed", gc, 6, d, sizeof(d)), VP_SCHED_IDLE);
	ASSERT_STREQ(d, "GC worker");
	const char *comp[] = { "__futex_abstimed_wait_common", "pthread_cond_timedwait@@GLIBC_2.3.2",
			       "os::PlatformMonitor::wait(long)", "Monitor::wait(long)", "CompileQueue::get(CompilerThread*)",
			       "CompileBroker::compiler_thread_loop()" };
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_BLOCKED_LOCK, "C2 CompilerThre", comp, 6, d, sizeof(d)), VP_SCHED_IDLE);
	ASSERT_STREQ(d, "compiler");
	ASSERT_STREQ(vp_sched_state_frame(VP_SCHED_IDLE), "[idle]");
	/* An application thread stopped for a safepoint, or in a HotSpot mutex: the JVM's. */
	const char *sp[] = { "syscall", "LinuxWaitBarrier::wait(int)", "SafepointSynchronize::block(JavaThread*)",
			     "Shop.buy()" };
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_BLOCKED_LOCK, "worker-1", sp, 4, d, sizeof(d)), VP_SCHED_BLOCKED_JVM);
	ASSERT_STREQ(d, "safepoint");
	const char *mx[] = { "__futex_abstimed_wait_common", "os::PlatformMonitor::wait(long)", "Monitor::wait(long)",
			     "JVM_StartThread", "java.lang.Thread.start0()" };
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_BLOCKED_LOCK, "main", mx, 5, d, sizeof(d)), VP_SCHED_BLOCKED_JVM);
	ASSERT_STREQ(d, "");
	ASSERT_STREQ(vp_sched_state_frame(VP_SCHED_BLOCKED_JVM), "[blocked: jvm]");
	/* Native code's own lock in an application thread stays a lock; run-queue waits and
	 * I/O keep the kernel's state whoever waits. */
	const char *jni[] = { "__lll_lock_wait", "pthread_mutex_lock", "native_compute", "Shop.callNative()" };
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_BLOCKED_LOCK, "worker-1", jni, 4, d, sizeof(d)), VP_SCHED_BLOCKED_LOCK);
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_RUNNABLE_PREEMPT, "GC Thread#0", gc, 6, d, sizeof(d)), VP_SCHED_RUNNABLE_PREEMPT);
	ASSERT_EQ(vp_sched_jvm_state(VP_SCHED_BLOCKED_IO, "GC Thread#0", gc, 6, d, sizeof(d)), VP_SCHED_BLOCKED_IO);
}

/* The table's rows for a JVM (issue 33): an application thread first, even when a GC
 * worker waited longer, each row named by its Java frames and its wait. */
static void java_rows(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	int on = vp_profile__add_event(p, "cpu-clock", "nanoseconds");
	int off = vp_profile__add_event(p, "off-cpu", "nanoseconds");
	uint32_t start = frame(p, "start_thread", VP_LAYER_NATIVE), run = frame(p, "java.lang.Thread.run()", VP_LAYER_INTERPRETED);
	uint32_t serve = frame(p, "Shop.serve()", VP_LAYER_JIT), nap = frame(p, "Shop.nap(long)", VP_LAYER_JIT);
	uint32_t jsleep = frame(p, "java.lang.Thread.sleep(long)", VP_LAYER_INTERPRETED);
	uint32_t jvm = frame(p, "JVM_Sleep", VP_LAYER_JVM), park = frame(p, "os::PlatformEvent::park(long)", VP_LAYER_JVM);
	uint32_t futex = frame(p, "__futex_abstimed_wait_common", VP_LAYER_NATIVE);
	uint32_t sched = frame(p, "__schedule", VP_LAYER_KERNEL), sl = frame(p, "[blocked: sleep]", VP_LAYER_KERNEL);
	uint32_t worker = frame(p, "WorkerThread::run()", VP_LAYER_JVM), sem = frame(p, "PosixSemaphore::wait()", VP_LAYER_JVM);
	uint32_t idle = frame(p, "[idle: GC worker]", VP_LAYER_KERNEL);
	uint32_t a[] = { start, run, serve, nap, jsleep, jvm, park, futex, sched, sl };
	uint32_t b[] = { start, run, serve, nap, jsleep, jvm, park, futex, sched, sl };   /* the same, by another tail */
	b[7] = frame(p, "pthread_cond_timedwait@@GLIBC_2.3.2", VP_LAYER_NATIVE);
	uint32_t c[] = { start, run, serve };
	uint32_t g[] = { start, worker, sem, futex, sched, idle };
	ASSERT_OK(vp_profile__add(p, a, 10, 20, 21, "shop-worker", off, 200, 200000000));
	ASSERT_OK(vp_profile__add(p, b, 10, 20, 21, "shop-worker", off, 100, 100000000));
	ASSERT_OK(vp_profile__add(p, c, 3, 20, 21, "shop-worker", on, 50, 50000000));
	ASSERT_OK(vp_profile__add(p, g, 6, 20, 22, "GC Thread#0", off, 900, 900000000));
	struct vp_report_opts ro = { .top = 1 };
	char path[] = "/tmp/vp-wall-XXXXXX";
	int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
	struct vp_out o = { 0 };
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(report_wall_text(p, &o, &ro));
	ASSERT_OK(vp_out__close(&o));
	FILE *f = fopen(path, "r");
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	fputs(buf, stderr);
	/* Both tails in one row, named by the application's frames and Thread.sleep. */
	ASSERT_CONTAINS(buf, "300.0  ..;Shop.serve;Shop.nap;Thread.sleep [sleep]\n");
	ASSERT_CONTAINS(buf, "Shop.serve [running]");
	/* --top 1: the application's thread, not the GC worker that waited longer. */
	ASSERT_CONTAINS(buf, "shop-worker");
	ASSERT_NULL(strstr(buf, "GC Thread#0"));
	ASSERT_CONTAINS(buf, "1 more threads");
	/* All threads: the GC worker after the heading, its row named by the function that
	 * waited, not by the semaphore and futex below it. */
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(report_wall_text(p, &o, NULL));
	ASSERT_OK(vp_out__close(&o));
	f = fopen(path, "r");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	const char *own = strstr(buf, "# the JVM's own threads"), *gcw = strstr(buf, "GC Thread#0");
	ASSERT_NOT_NULL(own);
	ASSERT_NOT_NULL(gcw);
	ASSERT_TRUE(strstr(buf, "shop-worker") < own && own < gcw);
	ASSERT_CONTAINS(buf, "  start_thread;WorkerThread::run() [idle: GC worker]\n");
	vp_profile__free(p);
}

int main(void)
{
	java_states();
	jvm_states();
	java_rows();
	struct vp_profile *p = vp_profile__new();
	char err[256] = "";
	ASSERT_NOT_NULL(p);
	/* Without off-CPU time there is no wall view, and it says how to get one. */
	ASSERT_EQ(vp_wall__add_events(p, err, sizeof(err)), -ENOENT);
	ASSERT_CONTAINS(err, "--off-cpu");

	int on = vp_profile__add_event(p, "cpu-clock", "nanoseconds");
	int st = vp_profile__add_event(p, "steal", "nanoseconds");
	int off = vp_profile__add_event(p, "off-cpu", "nanoseconds");
	uint32_t main_ = frame(p, "main", VP_LAYER_NATIVE), busy = frame(p, "busy", VP_LAYER_NATIVE);
	uint32_t idle = frame(p, "idle", VP_LAYER_NATIVE), sched = frame(p, "__schedule", VP_LAYER_KERNEL);
	uint32_t sleep = frame(p, vp_sched_state_frame(VP_SCHED_BLOCKED_SLEEP), VP_LAYER_KERNEL);
	uint32_t pre = frame(p, vp_sched_state_frame(VP_SCHED_RUNNABLE_PREEMPT), VP_LAYER_KERNEL);
	uint32_t stl = frame(p, vp_sched_state_frame(VP_SCHED_STEAL), VP_LAYER_HYPERVISOR);
	ASSERT_STREQ(vp_sched_state_frame(VP_SCHED_BLOCKED_LOCK), "[blocked: lock]");
	ASSERT_STREQ(vp_sched_state_frame(VP_SCHED_BLOCKED_IO), "[blocked: io]");

	uint32_t s1[] = { main_, busy }, s2[] = { main_, idle }, s3[] = { main_, idle, sched, sleep };
	uint32_t s4[] = { main_, busy, sched, pre }, s5[] = { main_, busy, sched, stl };
	ASSERT_OK(vp_profile__add(p, s1, 2, 10, 11, "t", on, 100, 100000000));
	ASSERT_OK(vp_profile__add(p, s2, 2, 10, 11, "t", on, 50, 50000000));
	ASSERT_OK(vp_profile__add(p, s3, 4, 10, 11, "t", off, 300, 300000000));
	ASSERT_OK(vp_profile__add(p, s4, 4, 10, 11, "t", off, 20, 20000000));
	ASSERT_OK(vp_profile__add(p, s5, 4, 10, 11, "t", st, 10, 10000000));
	/* The switch tracer's exact account: 160 ms on CPU, 10 ms of it stolen. */
	struct vp_thread_times tt = { .pid = 10, .tid = 11, .oncpu_ns = 160000000, .steal_ns = 10000000, .switches = 40 };
	ASSERT_OK(vp_profile__thread_times(p, &tt));
	/* A thread that ran but was never sampled. */
	struct vp_thread_times t2 = { .pid = 10, .tid = 12, .oncpu_ns = 7000000 };
	ASSERT_OK(vp_profile__thread_times(p, &t2));

	int wall = vp_wall__add_events(p, err, sizeof(err));
	ASSERT_GE(wall, 0);
	ASSERT_EQ(vp_wall__add_events(p, err, sizeof(err)), wall);   /* idempotent */
	int run = -1, rq = -1, bl = -1;
	for (int e = 0; e < p->nevents; e++) {
		if (!strcmp(p->events[e].name, "running"))
			run = e;
		if (!strcmp(p->events[e].name, "runnable"))
			rq = e;
		if (!strcmp(p->events[e].name, "blocked"))
			bl = e;
	}
	ASSERT_GE(run, 0);
	ASSERT_GE(rq, 0);
	ASSERT_GE(bl, 0);
	/* Running: 150 us (160 - 10 of steal) spread 2:1 like the samples, plus the
	 * unsampled thread's 7 ms. */
	ASSERT_UEQ(total(p, run), 157000000);
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (s->nframes == 2 && s->frames[1] == busy)
			ASSERT_UEQ(s->weight[run], 100000000);
		if (s->nframes == 2 && s->frames[1] == idle)
			ASSERT_UEQ(s->weight[run], 50000000);
		ASSERT_UEQ(s->weight[wall], s->weight[run] + s->weight[rq] + s->weight[bl] + s->weight[st]);
	}
	ASSERT_UEQ(total(p, rq), 20000000);
	ASSERT_UEQ(total(p, bl), 300000000);
	ASSERT_UEQ(total(p, wall), 157000000 + 20000000 + 300000000 + 10000000);

	/* The table: one row per thread, the parts in ms. */
	struct vp_out o = { 0 };
	char path[] = "/tmp/vp-wall-XXXXXX";
	int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(report_wall_text(p, &o, NULL));
	ASSERT_OK(vp_out__close(&o));
	FILE *f = fopen(path, "r");
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	fputs(buf, stderr);
	ASSERT_CONTAINS(buf, "150.0       20.0      300.0       10.0      480.0");   /* tid 11 */
	ASSERT_CONTAINS(buf, "main;idle");
	ASSERT_CONTAINS(buf, "[running: not sampled]");

	/* The same profile from a VM where no steal clock ran (the loader's "steal.clock"):
	 * the steal column is unknown, not 0.0, and the header says so (issue 34 item 2). */
	vp_profile__set_meta(p, "steal.clock", "none");
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(report_wall_text(p, &o, NULL));
	ASSERT_OK(vp_out__close(&o));
	f = fopen(path, "r");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	fputs(buf, stderr);
	ASSERT_CONTAINS(buf, "# steal: not measured (no steal clock)");
	ASSERT_CONTAINS(buf, "150.0       20.0      300.0          -      480.0");
	ASSERT_NULL(strstr(buf, "charged to the threads shown"));
	vp_profile__free(p);
	printf("ok\n");
	return 0;
}
