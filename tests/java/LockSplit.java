// Contended locks with a known wait (issue 25, record -e lock): in LockSplit.onMonitor
// WAITERS threads (default 1) wait for a synchronized monitor (class LockSplit$Monitor)
// that a holder keeps for 5 ms at a time, and in LockSplit.onLock as many wait for a
// ReentrantLock held the same way. Each waiter times its own waits with System.nanoTime
// around the entry, added up per lock. Prints "ready" once the threads run, every 50 ms
// "tick T M L" (T: System.nanoTime(), CLOCK_MONOTONIC; M, L: the monitor's and the lock's
// waits so far, each counted when it ended: a window of a run, e.g. an attached
// recording's, is the difference of two ticks), and at the end "monitor_ns=M lock_ns=L".
// With "virtual" after WAITERS, the ReentrantLock's waiters are virtual threads (JDK 21+;
// through reflection, since the fixtures compile for Java 17).
// Usage: LockSplit SECONDS [WAITERS [virtual]]
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

public class LockSplit {
    static final class Monitor { }

    static final Monitor MON = new Monitor();
    static final ReentrantLock LOCK = new ReentrantLock();
    static final AtomicLong MON_WAITED = new AtomicLong(), LOCK_WAITED = new AtomicLong();
    static volatile boolean stop;
    static volatile long sink;

    static void hold(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { }
    }

    static long onMonitor() {
        long t0 = System.nanoTime();
        synchronized (MON) {
            long t1 = System.nanoTime();
            sink++;
            return t1 - t0;
        }
    }

    static long onLock() {
        long t0 = System.nanoTime();
        LOCK.lock();
        try {
            long t1 = System.nanoTime();
            sink++;
            return t1 - t0;
        } finally {
            LOCK.unlock();
        }
    }

    static Thread virtualThread(Runnable r, String name) throws Exception {
        Object b = Thread.class.getMethod("ofVirtual").invoke(null);
        Class<?> builder = Class.forName("java.lang.Thread$Builder");
        b = builder.getMethod("name", String.class).invoke(b, name);
        Method unstarted = builder.getMethod("unstarted", Runnable.class);
        return (Thread) unstarted.invoke(b, r);
    }

    public static void main(String[] a) throws Exception {
        long end = System.nanoTime() + (long) (Double.parseDouble(a[0]) * 1e9);
        int waiters = a.length > 1 ? Integer.parseInt(a[1]) : 1;
        boolean virtual = a.length > 2 && a[2].equals("virtual");
        List<Thread> all = new ArrayList<>();
        all.add(new Thread(() -> { while (!stop) { synchronized (MON) { hold(5); } hold(1); } }, "monitor-holder"));
        all.add(new Thread(() -> { while (!stop) { LOCK.lock(); try { hold(5); } finally { LOCK.unlock(); } hold(1); } },
                           "lock-holder"));
        for (int i = 0; i < waiters; i++) {
            all.add(new Thread(() -> { while (!stop) { MON_WAITED.addAndGet(onMonitor()); hold(1); } }, "monitor-waiter"));
            Runnable lw = () -> { while (!stop) { LOCK_WAITED.addAndGet(onLock()); hold(1); } };
            all.add(virtual ? virtualThread(lw, "lock-waiter") : new Thread(lw, "lock-waiter"));
        }
        for (Thread t : all)
            t.start();
        System.out.println("ready");   // for attach tests (test-profiles-attach-jvm, test-lock-jvm)
        while (System.nanoTime() < end) {
            System.out.println("tick " + System.nanoTime() + " " + MON_WAITED.get() + " " + LOCK_WAITED.get());
            Thread.sleep(50);
        }
        stop = true;
        for (Thread t : all)
            t.join();
        System.out.println("monitor_ns=" + MON_WAITED.get() + " lock_ns=" + LOCK_WAITED.get());
    }
}
