// A fixed amount of work on two threads, with allocation: the JVM workload of
// bench/jvm-stacks.sh. Each thread runs handle() -> parse()/compute() ITER times and the
// process exits, so wall and CPU time compare across profilers. Usage: FixedWork [ITER]
public class FixedWork {
    static volatile long sink;

    static long compute(long x) {
        for (int i = 0; i < 2000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        return x;
    }

    static long parse(int k) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 8; i++)
            sb.append(k + i).append(',');
        return sb.length();
    }

    static long handle(long x, int k) {
        return compute(x) + parse(k);
    }

    public static void main(String[] args) throws Exception {
        final int iter = args.length > 0 ? Integer.parseInt(args[0]) : 1_500_000;
        Thread[] t = new Thread[2];
        for (int n = 0; n < 2; n++) {
            final int id = n;
            t[n] = new Thread(() -> {
                long x = id;
                for (int k = 0; k < iter; k++)
                    x = handle(x, k);
                sink += x;
            }, "worker-" + n);
            t[n].start();
        }
        for (Thread th : t)
            th.join();
    }
}
