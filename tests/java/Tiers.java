// Compile tiers (issue 25): one method compiled the normal way and one entered through
// on-stack replacement, each hot for half the run. Tiers.step is called from Tiers.drive
// with -XX:CompileCommand=dontinline,Tiers::step on the test's command line, so that its
// samples stay in its own compiled code (C1 with -XX:TieredStopAtLevel=1, else C2 once
// warm); Tiers.loop runs one long loop, which HotSpot compiles while it runs (OSR).
// Usage: Tiers SECONDS (of the thread's CPU time: a loaded VM's preemption does not shorten
// what gets sampled).
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class Tiers {
    static volatile long sink;
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    static long cpu() {
        return MX.getCurrentThreadCpuTime();
    }

    static long step(long x) {
        for (int i = 0; i < 500; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
        return x;
    }

    static long drive(long until) {
        long x = 1;
        do {
            for (int j = 0; j < 256; j++)   // the clock is a system call: once per ~0.1 ms
                x = step(x);
        } while (cpu() < until);
        return x;
    }

    static long loop(long until) {
        long x = 2;
        do {
            for (int j = 0; j < 256; j++)
                for (int i = 0; i < 500; i++) { x = x * 2862933555777941757L + 3037000493L; x ^= x >>> 31; }
        } while (cpu() < until);
        return x;
    }

    public static void main(String[] a) {
        long half = (long) (Double.parseDouble(a[0]) * 0.5e9);
        sink += drive(cpu() + half);
        sink += loop(cpu() + half);
    }
}
