// Contended locks with a known wait (issue 25, record -e lock): in LockSplit.onMonitor a
// thread waits for a synchronized monitor (class LockSplit$Monitor) that a holder keeps
// for 5 ms at a time, and in LockSplit.onLock one waits for a ReentrantLock held the same
// way. Each waiter times its own waits with System.nanoTime around the entry; the totals
// are printed at the end: "monitor_ns=N lock_ns=M" ("ready" once the threads run).
// Usage: LockSplit SECONDS
import java.util.concurrent.locks.ReentrantLock;

public class LockSplit {
    static final class Monitor { }

    static final Monitor MON = new Monitor();
    static final ReentrantLock LOCK = new ReentrantLock();
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

    public static void main(String[] a) throws Exception {
        long end = System.nanoTime() + (long) (Double.parseDouble(a[0]) * 1e9);
        Thread mh = new Thread(() -> { while (!stop) { synchronized (MON) { hold(5); } hold(1); } }, "monitor-holder");
        Thread lh = new Thread(() -> { while (!stop) { LOCK.lock(); try { hold(5); } finally { LOCK.unlock(); } hold(1); } }, "lock-holder");
        long[] waited = new long[2];
        Thread mw = new Thread(() -> { while (!stop) { waited[0] += onMonitor(); hold(1); } }, "monitor-waiter");
        Thread lw = new Thread(() -> { while (!stop) { waited[1] += onLock(); hold(1); } }, "lock-waiter");
        mh.start(); lh.start(); mw.start(); lw.start();
        System.out.println("ready");   // for attach tests (test-profiles-attach-jvm)
        while (System.nanoTime() < end)
            Thread.sleep(10);
        stop = true;
        mh.join(); lh.join(); mw.join(); lw.join();
        System.out.println("monitor_ns=" + waited[0] + " lock_ns=" + waited[1]);
    }
}
