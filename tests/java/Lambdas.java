// Lambdas with a known split of CPU time on one thread (the thread's own clock: on a loaded
// VM a preempted phase's wall time runs on without samples), for the name views (issue 25):
// the hidden classes HotSpot spins for the two lambdas get a new address in every run
// (Lambdas$$Lambda$1.0x00007f...), and the reflective call a numbered accessor
// (GeneratedMethodAccessor1 on JDK 17). Each phase runs to a deadline it checks itself,
// so the split (hot 50%, warm 30%, reflection 20%) holds whatever the JIT does; main's
// own loop runs only a few hundred times so that it is not OSR-compiled with everything
// inlined into it, which would move the lambdas' samples under main from run to run.
// Usage: Lambdas SECONDS (of the thread's CPU time, or three times as much wall time)
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Method;
import java.util.function.LongUnaryOperator;

public class Lambdas {
    static volatile long sink;
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    static long cpu() {
        return MX.getCurrentThreadCpuTime();
    }

    public static long reflected(long x) {
        for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
        return x;
    }

    static long spin(LongUnaryOperator op, long until) {
        long x = 1;
        do {
            for (int j = 0; j < 32; j++)   // the clock is a system call: once per ~0.1 ms
                x = op.applyAsLong(x);
        } while (cpu() < until);
        return x;
    }

    static long reflect(Method m, long until) throws Exception {
        long x = 1;
        do {
            for (int j = 0; j < 32; j++)
                x = (Long) m.invoke(null, x);
        } while (cpu() < until);
        return x;
    }

    public static void main(String[] a) throws Exception {
        double secs = Double.parseDouble(a[0]);
        LongUnaryOperator hot = x -> {
            for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
            return x;
        };
        LongUnaryOperator warm = x -> {
            for (int i = 0; i < 2000; i++) { x = x * 2862933555777941757L + 3037000493L; x ^= x >>> 31; }
            return x;
        };
        Method m = Lambdas.class.getMethod("reflected", long.class);
        long cpuEnd = cpu() + (long) (secs * 1e9), wallEnd = System.nanoTime() + (long) (secs * 3e9);
        while (cpu() < cpuEnd && System.nanoTime() < wallEnd) {
            long t = cpu();
            sink += spin(hot, t + 10_000_000L);
            sink += spin(warm, t + 16_000_000L);
            sink += reflect(m, t + 20_000_000L);
        }
    }
}
