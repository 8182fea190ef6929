// A virtual-thread-heavy workload for bench/vthreads-cost.sh: THREADS virtual threads
// (more than there are carriers) each loop over a little work and Thread.yield() for
// SECONDS, so that every iteration unmounts the virtual thread and mounts another, and
// the carriers never run out of work (the figure is throughput, not wakeup latency).
// Prints "yields=N cpu_ns=M": the yields and the process's CPU time over the loop alone
// (JVM start-up left out), so that a loaded machine changes the figure less. Needs JDK 21+.
import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.LongAdder;

public class VThreadYield {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 16;
        LongAdder yields = new LongAdder();
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long cpu0 = os.getProcessCpuTime();
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++)
            ts[i] = Thread.ofVirtual().start(() -> {
                long x = 1, n = 0;
                while (System.nanoTime() < deadline) {
                    for (int k = 0; k < 50; k++)
                        x = x * 6364136223846793005L + 1442695040888963407L;
                    Thread.yield();
                    n++;
                }
                yields.add(n);
                sink += x;
            });
        for (Thread t : ts)
            t.join();
        long cpu = os.getProcessCpuTime() - cpu0;
        System.out.printf("yields=%d cpu_ns=%d%n", yields.sum(), cpu);
    }
}
