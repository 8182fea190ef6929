// Three hot methods with a known 50/30/20 split of wall time on one thread. Each phase
// runs to a deadline it checks itself, so the split holds whatever the JIT does; the
// allocation makes young GCs (and so code-map epochs) happen. Usage: JitSplit SECONDS
// [EXIT_CODE]; prints the phase totals in ns and exits with EXIT_CODE (default 0).
public class JitSplit {
    static volatile long sink;
    static Object[] keep = new Object[256];

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
        while (System.nanoTime() < until) {
            for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
            x += alloc(k++);
        }
        sink += x;
    }

    static void hotB(long until) {
        long x = 2; int k = 0;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
            x += alloc(k++);
        }
        sink += x;
    }

    static void hotC(long until) {
        long x = 3; int k = 0;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
            x += alloc(k++);
        }
        sink += x;
    }

    public static void main(String[] args) {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        int code = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        // Short rounds (100 ms) so that any sampling window sees the same split.
        long round = 100_000_000L;
        long end = System.nanoTime() + (long) (secs * 1e9);
        long[] spent = new long[3];
        for (int i = 0; i < 20000; i++) sink += work(i, 16);
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            hotA(t0 + round * 50 / 100);
            long t1 = System.nanoTime();
            hotB(t1 + round * 30 / 100);
            long t2 = System.nanoTime();
            hotC(t2 + round * 20 / 100);
            long t3 = System.nanoTime();
            spent[0] += t1 - t0; spent[1] += t2 - t1; spent[2] += t3 - t2;
        }
        System.out.println("JitSplit hotA " + spent[0] + " hotB " + spent[1] + " hotC " + spent[2]);
        System.exit(code);
    }
}
