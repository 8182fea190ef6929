// Runs hot methods for N seconds (default: forever), for attach tests. Prints "ready"
// once it started, then exits with code EXIT_CODE (default 0). With STOP_FILE, it exits
// as soon as that file exists (checked every 20 ms), so that a test ends it when it has
// seen what it needs instead of waiting out N. Usage:
// LateAttach [SECONDS [EXIT_CODE [STOP_FILE]]]
import java.io.File;

public class LateAttach {
    static volatile long sink;

    static long lateHotLoop(long x) {
        for (int i = 0; i < 10000; i++) {
            x = x * 2862933555777941757L + 3037000493L;
            x ^= x >>> 31;
        }
        return x;
    }

    static long lateHotOther(long x) {
        StringBuilder sb = new StringBuilder();
        sb.append(x);
        return sb.length() + x;
    }

    public static void main(String[] args) {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : -1;
        int code = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        File stop = args.length > 2 ? new File(args[2]) : null;
        long end = secs < 0 ? Long.MAX_VALUE : System.nanoTime() + (long) (secs * 1e9);
        long nextCheck = 0;
        System.out.println("ready");
        System.out.flush();
        long x = 1;
        for (long now; (now = System.nanoTime()) < end;) {
            if (stop != null && now >= nextCheck) {
                if (stop.exists())
                    break;
                nextCheck = now + 20_000_000L;
            }
            x = lateHotLoop(x);
            x = lateHotOther(x);
        }
        sink = x;
        System.exit(code);
    }
}
