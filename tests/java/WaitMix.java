// Java threads that wait in each way a Java developer tells apart, for the wall view
// (issue 33). Each alternates about 1 ms of computing with a wait from a known method,
// for SECONDS (args[1], default 4):
//   mode "mix" (args[0]):
//     "mix-sleeper"   doSleep()  -> Thread.sleep(10)
//     "mix-parker"    doPark()   -> LinkedBlockingQueue.poll(20 ms) on a queue that stays empty
//     "mix-locker"    doLock()   -> a synchronized block that "mix-holder" holds 15 ms at a time
//     "mix-waiter"    doWait()   -> Object.wait(10) on a monitor nobody notifies
//   mode "calm": "calm-cruncher" only computes, "calm-napper" computes and sleeps: no lock is
//     ever contended, so every lock the profile names would be wrong.
// Prints "ready" once all threads run.
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

public class WaitMix {
    static volatile long sink;
    static final Object LOCK = new Object();
    static final Object WAITED = new Object();
    static final BlockingQueue<Object> QUEUE = new LinkedBlockingQueue<>();
    static volatile long deadline;

    static long compute(long x, long nanos) {
        long end = System.nanoTime() + nanos;
        while (System.nanoTime() < end)
            for (int i = 0; i < 200; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                x ^= x >>> 29;
            }
        return x;
    }

    static void doSleep() throws InterruptedException {
        Thread.sleep(10);
    }

    static void doPark() throws InterruptedException {
        if (QUEUE.poll(20, TimeUnit.MILLISECONDS) != null)
            sink++;
    }

    static void doLock() {
        synchronized (LOCK) {
            sink++;
        }
    }

    static void doWait() throws InterruptedException {
        synchronized (WAITED) {
            WAITED.wait(10);
        }
    }

    interface Body { void run() throws Exception; }

    static Thread worker(String name, long computeNanos, Body body) {
        Thread t = new Thread(() -> {
            long x = 1;
            try {
                while (System.nanoTime() < deadline) {
                    x = compute(x, computeNanos);
                    body.run();
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            sink += x;
        }, name);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "mix";
        double secs = args.length > 1 ? Double.parseDouble(args[1]) : 4;
        deadline = System.nanoTime() + (long) (secs * 1e9);
        Thread[] ts;
        if (mode.equals("calm")) {
            ts = new Thread[] {
                worker("calm-cruncher", 50_000_000, () -> { }),
                worker("calm-napper", 1_000_000, WaitMix::doSleep),
            };
        } else {
            Thread holder = new Thread(() -> {
                long x = 7;
                while (System.nanoTime() < deadline) {
                    synchronized (LOCK) {
                        x = compute(x, 15_000_000);
                    }
                    x = compute(x, 100_000);
                }
                sink += x;
            }, "mix-holder");
            holder.start();
            ts = new Thread[] {
                worker("mix-sleeper", 1_000_000, WaitMix::doSleep),
                worker("mix-parker", 1_000_000, WaitMix::doPark),
                worker("mix-locker", 1_000_000, WaitMix::doLock),
                worker("mix-waiter", 1_000_000, WaitMix::doWait),
                holder,
            };
        }
        System.out.println("ready");
        System.out.flush();
        for (Thread t : ts)
            t.join();
    }
}
