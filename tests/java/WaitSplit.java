// Java threads that wait in the three ways a service does, each from a known method,
// for the off-CPU tests (issue 21). Each worker alternates about 2 ms of computing with
// a wait, for SECONDS (args[0], default 6):
//   "sleep-request-worker"  handleRequest() -> queryDatabase() -> Thread.sleep(10)
//   "park-request-worker"   pollRequest() -> BlockingQueue.poll(20 ms) on a queue that stays empty
//   "lock-request-worker"   lockRequest() -> a synchronized block that "lock-holder" holds while it
//                   computes for 15 ms at a time (a contended monitor enter)
// Started without -XX:+PreserveFramePointer, as production JVMs are. Prints "ready"
// once all threads run.
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

public class WaitSplit {
    static volatile long sink;
    static final Object LOCK = new Object();
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

    static void queryDatabase() throws InterruptedException {
        Thread.sleep(10);
    }

    static void handleRequest() throws InterruptedException {
        queryDatabase();
    }

    static void pollRequest() throws InterruptedException {
        if (QUEUE.poll(20, TimeUnit.MILLISECONDS) != null)
            sink++;
    }

    static void lockRequest() {
        synchronized (LOCK) {
            sink++;
        }
    }

    interface Body { void run() throws Exception; }

    static Thread worker(String name, Body body) {
        Thread t = new Thread(() -> {
            long x = 1;
            try {
                while (System.nanoTime() < deadline) {
                    x = compute(x, 2_000_000);
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
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 6;
        deadline = System.nanoTime() + (long) (secs * 1e9);
        Thread holder = new Thread(() -> {
            long x = 7;
            while (System.nanoTime() < deadline) {
                synchronized (LOCK) {
                    x = compute(x, 15_000_000);
                }
                x = compute(x, 100_000);
            }
            sink += x;
        }, "lock-holder");
        holder.start();
        Thread[] ts = {
            worker("sleep-request-worker", WaitSplit::handleRequest),
            worker("park-request-worker", WaitSplit::pollRequest),
            worker("lock-request-worker", WaitSplit::lockRequest),
        };
        System.out.println("ready");
        System.out.flush();
        for (Thread t : ts)
            t.join();
        holder.join();
    }
}
