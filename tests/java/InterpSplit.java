// Three interpreted callers of one compiled method, in a known 50/30/20 split of wall time.
// Each round (100 ms) calls callerA, callerB and callerC once; each calls Hot.spin (about
// 1 ms a call, compiled early) until its share of the round is over. The callers run a few
// hundred loop iterations per second at most, far below HotSpot's compile and on-stack-
// replacement thresholds, so they stay interpreted for the whole run, as cold dispatchers
// early in a service's life do. Usage: InterpSplit SECONDS; prints the totals in ns.
public class InterpSplit {
    static volatile long sink;

    static final class Hot {
        static long spin(long x, long until) {
            // About a millisecond of arithmetic, checked against the caller's deadline.
            for (int r = 0; r < 64 && System.nanoTime() < until; r++)
                for (int i = 0; i < 4000; i++) {
                    x = x * 6364136223846793005L + 1442695040888963407L;
                    x ^= x >>> 29;
                }
            return x;
        }
    }

    static long callerA(long until) {
        long x = 1;
        while (System.nanoTime() < until)
            x = Hot.spin(x, until);
        return x;
    }

    static long callerB(long until) {
        long x = 2;
        while (System.nanoTime() < until)
            x = Hot.spin(x, until);
        return x;
    }

    static long callerC(long until) {
        long x = 3;
        while (System.nanoTime() < until)
            x = Hot.spin(x, until);
        return x;
    }

    public static void main(String[] args) {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        long round = 100_000_000L;
        long end = System.nanoTime() + (long) (secs * 1e9);
        long[] spent = new long[3];
        // Hot.spin gets compiled before the measured rounds, so that samples land in JIT code.
        for (int i = 0; i < 3000; i++)
            sink += Hot.spin(i, System.nanoTime() + 20_000);
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            sink += callerA(t0 + round * 5 / 10);
            long t1 = System.nanoTime();
            sink += callerB(t1 + round * 3 / 10);
            long t2 = System.nanoTime();
            sink += callerC(t2 + round * 2 / 10);
            long t3 = System.nanoTime();
            spent[0] += t1 - t0; spent[1] += t2 - t1; spent[2] += t3 - t2;
        }
        System.out.println(spent[0] + " " + spent[1] + " " + spent[2]);
    }
}
