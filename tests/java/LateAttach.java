// Runs hot methods for N seconds (default: forever), for attach tests. Prints "ready"
// once it started, then exits with code EXIT_CODE (default 0). Usage: LateAttach [SECONDS [EXIT_CODE]]
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
        long end = secs < 0 ? Long.MAX_VALUE : System.nanoTime() + (long) (secs * 1e9);
        System.out.println("ready");
        System.out.flush();
        long x = 1;
        while (System.nanoTime() < end) {
            x = lateHotLoop(x);
            x = lateHotOther(x);
        }
        sink = x;
        System.exit(code);
    }
}
