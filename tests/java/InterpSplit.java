// Three interpreted callers of one compiled method, in a known 50/30/20 split of the thread's
// CPU time. Each round (100 ms of CPU) calls callerA, callerB and callerC once; each calls
// Hot.spin (about 1 ms a call, compiled early) until its share of the round is over. The
// clock is the thread's own CPU time, not wall time: on a loaded VM a preempted caller's
// wall time runs on while it gets no samples, and the split the profile shows would be off
// by whatever the neighbours took (a CI run measured A 48.5%, C 21.7% on wall deadlines). The callers run a few
// hundred loop iterations per second at most, far below HotSpot's compile and on-stack-
// replacement thresholds, so they stay interpreted for the whole run, as cold dispatchers
// early in a service's life do. Usage: InterpSplit SECONDS (of CPU time); prints the CPU time of each caller in ns.
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class InterpSplit {
    static volatile long sink;
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    static long cpu() {
        return MX.getCurrentThreadCpuTime();
    }

    static final class Hot {
        static long spin(long x, long until) {
            // About a millisecond of arithmetic, checked against the caller's deadline.
            for (int r = 0; r < 64 && ((r & 7) != 0 || cpu() < until); r++)   // the clock: every 8th
                for (int i = 0; i < 4000; i++) {
                    x = x * 6364136223846793005L + 1442695040888963407L;
                    x ^= x >>> 29;
                }
            return x;
        }
    }

    static long callerA(long until) {
        long x = 1;
        while (cpu() < until)
            x = Hot.spin(x, until);
        return x;
    }

    static long callerB(long until) {
        long x = 2;
        while (cpu() < until)
            x = Hot.spin(x, until);
        return x;
    }

    static long callerC(long until) {
        long x = 3;
        while (cpu() < until)
            x = Hot.spin(x, until);
        return x;
    }

    public static void main(String[] args) {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        long round = 100_000_000L;
        // The run's length is CPU time too (at most ten times as much wall time), so that a
        // loaded machine gives as many samples as a quiet one, only later.
        long cpuEnd = cpu() + (long) (secs * 1e9);
        long wallEnd = System.nanoTime() + (long) (secs * 10e9);
        long[] spent = new long[3];
        // Hot.spin gets compiled before the measured rounds, so that samples land in JIT code.
        for (int i = 0; i < 3000; i++)
            sink += Hot.spin(i, cpu() + 20_000);
        while (cpu() < cpuEnd && System.nanoTime() < wallEnd) {
            long t0 = cpu();
            sink += callerA(t0 + round * 5 / 10);
            long t1 = cpu();
            sink += callerB(t1 + round * 3 / 10);
            long t2 = cpu();
            sink += callerC(t2 + round * 2 / 10);
            long t3 = cpu();
            spent[0] += t1 - t0; spent[1] += t2 - t1; spent[2] += t3 - t2;
        }
        System.out.println(spent[0] + " " + spent[1] + " " + spent[2]);
    }
}
