// Threads whose Java names are longer than the kernel's 15 characters, for the thread
// name tests: "viprof-early-worker-thread" starts at once, with "viprof-pool-thread-1"
// (spins) and "viprof-pool-thread-2" (sleeps), which share their kernel name
// "viprof-pool-thr"; "viprof-late-worker-thread" starts after DELAY seconds (so an agent
// attached before then sees it start). The spinners spin until SECONDS pass. Prints
// "ready" once the early ones run.
// Usage: LongNames [SECONDS [DELAY]]
public class LongNames {
    static volatile long sink;

    static Thread spinner(String name) {
        Thread t = new Thread(() -> {
            long x = name.length();
            while (true) {
                for (int i = 0; i < 100000; i++)
                    x = x * 6364136223846793005L + 1442695040888963407L;
                sink = x;
            }
        }, name);
        t.setDaemon(true);
        return t;
    }

    public static void main(String[] args) throws Exception {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 20;
        double delay = args.length > 1 ? Double.parseDouble(args[1]) : 4;
        spinner("viprof-early-worker-thread").start();
        spinner("viprof-pool-thread-1").start();
        Thread sleeper = new Thread(() -> {
            try { Thread.sleep(1000000); } catch (InterruptedException e) { }
        }, "viprof-pool-thread-2");
        sleeper.setDaemon(true);
        sleeper.start();
        System.out.println("ready");
        System.out.flush();
        Thread.sleep((long) (delay * 1000));
        spinner("viprof-late-worker-thread").start();
        Thread.sleep((long) ((secs - delay) * 1000));
    }
}
