// A service-like JVM for attach tests: two worker threads, each in its own Runnable whose
// run() calls handle() -> parse()/compute() in a loop, allocating as it goes, until the
// process is killed (or SECONDS pass). Prints "ready" once both workers are running.
// Started without -XX:+PreserveFramePointer, as production JVMs are.
public class Workers {
    static volatile long sink;

    static final class Worker implements Runnable {
        final int id;
        Worker(int id) { this.id = id; }

        long compute(long x) {
            for (int i = 0; i < 3000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                x ^= x >>> 29;
            }
            return x;
        }

        long parse(int k) {
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < 8; i++)
                sb.append(k + i).append(',');
            return sb.length();
        }

        long handle(long x, int k) {
            return compute(x) + parse(k);
        }

        public void run() {
            long x = id;
            int k = 0;
            while (true)
                x = handle(x, k++);
        }
    }

    public static void main(String[] args) throws Exception {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 3600;
        Thread a = new Thread(new Worker(1), "worker-1");
        Thread b = new Thread(new Worker(2), "worker-2");
        a.setDaemon(true);
        b.setDaemon(true);
        a.start();
        b.start();
        System.out.println("ready");
        System.out.flush();
        Thread.sleep((long) (secs * 1000));
    }
}
