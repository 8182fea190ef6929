// A service-like JVM for bench/suite.py: an acceptor thread hands requests through a
// bounded queue to two busy worker threads, which parse each one, build maps and strings
// (young-generation allocation, so the GC runs all the time), compute, and record the
// latency in a shared histogram; a metrics thread wakes every 100 ms. It serves a fixed
// number of requests and exits, so that CPU time with and without a profiler compares;
// throughput and latency percentiles are printed on stdout.
// Usage: Service [REQUESTS]   (default 300000: about 7 s of CPU, 6 s of wall on this 2-vCPU VM)
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

public class Service {
    static final String POISON = "";
    static final AtomicLong served = new AtomicLong();
    static final AtomicLongArray latencyBuckets = new AtomicLongArray(64);   // log2 of ns
    static volatile long sink;

    static String makeRequest(int id) {
        StringBuilder sb = new StringBuilder(128);
        sb.append("id=").append(id).append("&user=u").append(id % 977).append("&items=");
        for (int i = 0; i < 6; i++)
            sb.append(id * 31 + i).append(i < 5 ? "," : "");
        return sb.toString();
    }

    static Map<String, String> parse(String req) {
        Map<String, String> m = new HashMap<>();
        for (String kv : req.split("&")) {
            int eq = kv.indexOf('=');
            m.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return m;
    }

    static long price(String items) {
        long total = 0;
        for (String it : items.split(",")) {
            long x = Long.parseLong(it);
            for (int i = 0; i < 1500; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                x ^= x >>> 31;
            }
            total += x & 0xffff;
        }
        return total;
    }

    static String handle(String req) {
        Map<String, String> m = parse(req);
        long p = price(m.get("items"));
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 8; i++)
            lines.add(m.get("user") + ":" + (p + i));
        return String.join(";", lines);
    }

    public static void main(String[] args) throws Exception {
        final int requests = args.length > 0 ? Integer.parseInt(args[0]) : 300_000;
        final BlockingQueue<String> q = new ArrayBlockingQueue<>(1024);
        final int workers = 2;
        long start = System.nanoTime();

        Thread acceptor = new Thread(() -> {
            try {
                for (int i = 0; i < requests; i++)
                    q.put(makeRequest(i));
                for (int i = 0; i < workers; i++)
                    q.put(POISON);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "acceptor");
        Thread[] w = new Thread[workers];
        for (int n = 0; n < workers; n++) {
            w[n] = new Thread(() -> {
                long h = 0;
                try {
                    for (;;) {
                        String r = q.take();
                        if (r == POISON)
                            break;
                        long t0 = System.nanoTime();
                        h += handle(r).hashCode();
                        long dt = System.nanoTime() - t0;
                        latencyBuckets.incrementAndGet(63 - Long.numberOfLeadingZeros(Math.max(dt, 1)));
                        served.incrementAndGet();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                sink += h;
            }, "worker-" + n);
        }
        Thread metrics = new Thread(() -> {
            long last = 0;
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    break;
                }
                long s = served.get();
                sink += s - last;
                last = s;
            }
        }, "metrics");
        metrics.setDaemon(true);
        metrics.start();
        acceptor.start();
        for (Thread t : w)
            t.start();
        for (Thread t : w)
            t.join();
        acceptor.join();
        metrics.interrupt();
        double secs = (System.nanoTime() - start) / 1e9;
        long total = 0, seen = 0;
        for (int i = 0; i < 64; i++)
            total += latencyBuckets.get(i);
        int p50 = -1, p99 = -1;
        for (int i = 0; i < 64; i++) {
            seen += latencyBuckets.get(i);
            if (p50 < 0 && seen * 2 >= total)
                p50 = i;
            if (p99 < 0 && seen * 100 >= total * 99)
                p99 = i;
        }
        System.out.printf("served %d requests in %.2f s: %.0f/s, latency p50 < %d us, p99 < %d us%n", served.get(), secs,
                served.get() / secs, (2L << p50) / 1000, (2L << p99) / 1000);
    }
}
