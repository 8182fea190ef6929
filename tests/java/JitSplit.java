// Three hot methods with a known 50/30/20 split of the main thread's CPU time. Each phase
// runs to a deadline it checks itself, so the split holds whatever the JIT does; the
// allocation makes young GCs (and so code-map epochs) happen. The clock is the thread's
// CPU time: on a loaded VM a preempted phase's wall time runs on without samples. Usage:
// JitSplit SECONDS [EXIT_CODE [FILE]]: SECONDS of the thread's CPU time, or three times as
// much wall time if the machine is that loaded; prints the phase totals (CPU ns), also
// into FILE when given (for a test whose launcher keeps no stdout), and exits with
// EXIT_CODE (default 0).
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class JitSplit {
    static volatile long sink;
    static Object[] keep = new Object[256];
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    static long cpu() {
        return MX.getCurrentThreadCpuTime();
    }

    // Warms up once at start; the hot methods do not share it (see below).
    static long work(long x, int n) {
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        return x;
    }

    static long alloc(int k) {
        byte[] b = new byte[64 + (k & 511)];
        keep[k & 255] = b;
        return b.length;
    }

    // Each hot method carries its own copy of the arithmetic instead of calling work():
    // a sample in a shared callee under a still-interpreted caller could not be told
    // apart (interpreted frames are all "Interpreter"), which would blur the split.
    static void hotA(long until) {
        long x = 1; int k = 0;
        do {
            for (int j = 0; j < 32; j++) {
                for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
                x += alloc(k++);
            }
        } while (cpu() < until);   // a system call: once per 32 rounds (~0.1 ms)
        sink += x;
    }

    static void hotB(long until) {
        long x = 2; int k = 0;
        do {
            for (int j = 0; j < 32; j++) {
                for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
                x += alloc(k++);
            }
        } while (cpu() < until);   // a system call: once per 32 rounds (~0.1 ms)
        sink += x;
    }

    static void hotC(long until) {
        long x = 3; int k = 0;
        do {
            for (int j = 0; j < 32; j++) {
                for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
                x += alloc(k++);
            }
        } while (cpu() < until);   // a system call: once per 32 rounds (~0.1 ms)
        sink += x;
    }

    public static void main(String[] args) {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        int code = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        // Short rounds (100 ms) so that any sampling window sees the same split.
        long round = 100_000_000L;
        long cpuEnd = cpu() + (long) (secs * 1e9), wallEnd = System.nanoTime() + (long) (secs * 3e9);
        long[] spent = new long[3];
        for (int i = 0; i < 20000; i++) sink += work(i, 16);
        while (cpu() < cpuEnd && System.nanoTime() < wallEnd) {
            long t0 = cpu();
            hotA(t0 + round * 50 / 100);
            long t1 = cpu();
            hotB(t1 + round * 30 / 100);
            long t2 = cpu();
            hotC(t2 + round * 20 / 100);
            long t3 = cpu();
            spent[0] += t1 - t0; spent[1] += t2 - t1; spent[2] += t3 - t2;
        }
        String totals = "JitSplit hotA " + spent[0] + " hotB " + spent[1] + " hotC " + spent[2];
        System.out.println(totals);
        if (args.length > 2) {
            try {
                java.nio.file.Files.writeString(java.nio.file.Path.of(args[2]), totals + "\n");
            } catch (java.io.IOException e) {
                System.err.println("JitSplit: cannot write " + args[2] + ": " + e);
                code = 1;
            }
        }
        System.exit(code);
    }
}
