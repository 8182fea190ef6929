// Waits of known, distinct lengths, each timed by the thread that waits, for the JFR
// writer's real start times and durations (issue 33 item 4). For SECONDS:
//   "jt-sleeper"  Thread.sleep(L) in doSleep(), L cycling through SLEEPS (ms)
//   "jt-mwaiter"  enters a synchronized monitor (class JfrTimes$Monitor) in onMonitor()
//                 that "jt-mholder" holds for L ms at a time, L cycling through MONITOR
//   "jt-lwaiter"  takes a ReentrantLock in onLock() that "jt-lholder" holds for L ms at a
//                 time, L cycling through LOCK
//   "jt-alloc"    allocates arrays of a few sizes, for allocation samples
// A waiter starts waiting only once its holder holds (a short spin, no park of its own), so
// each wait is about its hold. Every wait is logged as "KIND START_NS DURATION_NS L"
// (System.nanoTime(), CLOCK_MONOTONIC: the recorder's clock), written to OUT at the end.
// Usage: JfrTimes SECONDS OUT
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.ReentrantLock;

public class JfrTimes {
    static final class Monitor { }

    static final long[] SLEEPS = { 11, 17, 23, 31, 41, 53, 67 };
    static final long[] MONITOR = { 13, 19, 29, 37, 47, 59, 71 };
    static final long[] LOCK = { 15, 21, 33, 43, 57, 73 };
    static final Monitor MON = new Monitor();
    static final ReentrantLock LK = new ReentrantLock();
    static final ConcurrentLinkedQueue<String> LOG = new ConcurrentLinkedQueue<>();   // no lock of its own
    static volatile boolean stop;
    static volatile int monHeld = -1, lockHeld = -1;
    static volatile Object sink;

    static void log(String kind, long t0, long t1, long ms) {
        LOG.add(kind + " " + t0 + " " + (t1 - t0) + " " + ms);
    }

    static void hold(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { }
    }

    static void doSleep(long ms) throws InterruptedException {
        long t0 = System.nanoTime();
        Thread.sleep(ms);
        log("sleep", t0, System.nanoTime(), ms);
    }

    static void onMonitor() {
        long t0 = System.nanoTime();
        synchronized (MON) {
            log("monitor", t0, System.nanoTime(), MONITOR[monHeld % MONITOR.length]);
        }
    }

    static void onLock() {
        long t0 = System.nanoTime();
        LK.lock();
        try {
            log("lock", t0, System.nanoTime(), LOCK[lockHeld % LOCK.length]);
        } finally {
            LK.unlock();
        }
    }

    public static void main(String[] a) throws Exception {
        long end = System.nanoTime() + (long) (Double.parseDouble(a[0]) * 1e9);
        List<Thread> all = new ArrayList<>();
        all.add(new Thread(() -> {
            for (int i = 0; !stop; i++)
                try { doSleep(SLEEPS[i % SLEEPS.length]); } catch (InterruptedException e) { }
        }, "jt-sleeper"));
        all.add(new Thread(() -> {
            for (int i = 0; !stop; i++) {
                synchronized (MON) { monHeld = i; hold(MONITOR[i % MONITOR.length]); }
                while (!stop && monHeld == i) Thread.onSpinWait();   // the waiter got it
                hold(2);
            }
            monHeld = -2;
        }, "jt-mholder"));
        all.add(new Thread(() -> {
            for (int i = 0; !stop; i++) {
                while (!stop && monHeld != i) Thread.onSpinWait();
                if (stop) break;
                onMonitor();
                monHeld = -1;
            }
        }, "jt-mwaiter"));
        all.add(new Thread(() -> {
            for (int i = 0; !stop; i++) {
                LK.lock();
                try { lockHeld = i; hold(LOCK[i % LOCK.length]); } finally { LK.unlock(); }
                while (!stop && lockHeld == i) Thread.onSpinWait();
                hold(2);
            }
        }, "jt-lholder"));
        all.add(new Thread(() -> {
            for (int i = 0; !stop; i++) {
                while (!stop && lockHeld != i) Thread.onSpinWait();
                if (stop) break;
                onLock();
                lockHeld = -1;
            }
        }, "jt-lwaiter"));
        all.add(new Thread(() -> {
            for (int i = 0; !stop; i++) {
                sink = new long[64 << (i % 6)];
                if (i % 1000 == 0) hold(1);
            }
        }, "jt-alloc"));
        for (Thread t : all)
            t.start();
        System.out.println("ready");
        while (System.nanoTime() < end)
            Thread.sleep(20);
        stop = true;
        for (Thread t : all)
            t.join();
        try (PrintWriter w = new PrintWriter(a[1])) {
            for (String s : LOG)
                w.println(s);
        }
    }
}
