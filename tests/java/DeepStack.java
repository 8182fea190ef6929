// Deep Java stacks (issue 22 item 3): the main thread recurses DEPTH calls deep through
// recurse() and spins in leaf() at the bottom for about 50 ms, then returns and does it
// again, until SECONDS pass. Run as is, recurse and leaf are compiled (warmed up before
// "ready" is printed); with -Xint every one of the DEPTH frames is interpreted. The
// recursion is not a tail call (the result is used after it returns), so each level is
// a frame (C2 may inline one level of recursion into another, which the code map names).
// With "sleep" (issue 32 item 4), leaf() sleeps 20 ms instead of spinning: the thread is
// off CPU DEPTH calls deep.
// Usage: java DeepStack DEPTH SECONDS [sleep]
public class DeepStack {
    static volatile long sink;
    static volatile boolean sleep;

    static long leaf(long iters) {
        if (sleep) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            return 1;
        }
        long x = 1;
        for (long i = 0; i < iters; i++)
            x = x * 6364136223846793005L + i;
        return x;
    }

    static long recurse(int depth, long iters) {
        if (depth == 0)
            return leaf(iters);
        long r = recurse(depth - 1, iters);
        return r ^ depth;
    }

    public static void main(String[] args) {
        int depth = Integer.parseInt(args[0]);
        long seconds = Long.parseLong(args[1]);
        boolean interpreted = java.lang.management.ManagementFactory.getRuntimeMXBean()
                .getInputArguments().contains("-Xint");
        // About 50 ms in leaf per round, compiled or interpreted.
        long iters = interpreted ? 1_000_000L : 40_000_000L;
        if (!interpreted) {
            for (int i = 0; i < 20000; i++)
                sink += recurse(20, 50);
            for (int i = 0; i < 20; i++)
                sink += recurse(depth, 1_000_000L);
        }
        sleep = args.length > 2 && args[2].equals("sleep");
        System.out.println("ready");
        System.out.flush();
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (System.nanoTime() < end)
            sink += recurse(depth, iters);
    }
}
