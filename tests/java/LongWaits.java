// Java threads that wait long, each from a known method, for the attached off-CPU test
// (issue 32): an interval is likely to straddle a recording's start and its end, and one
// thread never wakes during it. For SECONDS (args[0], default 60):
//   "long-sleeper"    sleepLong() -> Thread.sleep(700), over and over
//   "long-waiter"     waitLong() -> Object.wait(900) on a monitor nobody notifies
//   "parked-forever"  parkForever() -> LockSupport.park(), never unparked
// and main sleeps until the end. Prints "ready" once all threads wait.
import java.util.concurrent.locks.LockSupport;

public class LongWaits {
    static final Object MONITOR = new Object();
    static volatile long deadline;

    static void sleepLong() throws InterruptedException {
        Thread.sleep(700);
    }

    static void waitLong() throws InterruptedException {
        synchronized (MONITOR) {
            MONITOR.wait(900);
        }
    }

    static void parkForever() {
        LockSupport.park();
    }

    interface Body { void run() throws Exception; }

    static Thread start(String name, Body body) {
        Thread t = new Thread(() -> {
            try {
                while (System.nanoTime() < deadline)
                    body.run();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 60;
        deadline = System.nanoTime() + (long) (secs * 1e9);
        Thread[] ts = { start("long-sleeper", LongWaits::sleepLong), start("long-waiter", LongWaits::waitLong),
                        start("parked-forever", LongWaits::parkForever) };
        for (Thread t : ts)
            while (t.getState() != Thread.State.TIMED_WAITING && t.getState() != Thread.State.WAITING)
                Thread.sleep(10);
        System.out.println("ready");
        System.out.flush();
        Thread.sleep((long) (secs * 1000));
    }
}
