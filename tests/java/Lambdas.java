// Lambdas with a known split of wall time on one thread, for the name views (issue 25):
// the hidden classes HotSpot spins for the two lambdas get a new address in every run
// (Lambdas$$Lambda$1.0x00007f...), and the reflective call a numbered accessor
// (GeneratedMethodAccessor1 on JDK 17). Each phase runs to a deadline it checks itself,
// so the split (hot 50%, warm 30%, reflection 20%) holds whatever the JIT does; main's
// own loop runs only a few hundred times so that it is not OSR-compiled with everything
// inlined into it, which would move the lambdas' samples under main from run to run.
// Usage: Lambdas SECONDS
import java.lang.reflect.Method;
import java.util.function.LongUnaryOperator;

public class Lambdas {
    static volatile long sink;

    public static long reflected(long x) {
        for (int i = 0; i < 2000; i++) { x = x * 6364136223846793005L + 1442695040888963407L; x ^= x >>> 29; }
        return x;
    }

    static long spin(LongUnaryOperator op, long until) {
        long x = 1;
        while (System.nanoTime() < until)
            x = op.applyAsLong(x);
        return x;
    }

    static long reflect(Method m, long until) throws Exception {
        long x = 1;
        while (System.nanoTime() < until)
            x = (Long) m.invoke(null, x);
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
        long end = System.nanoTime() + (long) (secs * 1e9);
        while (System.nanoTime() < end) {
            long t = System.nanoTime();
            sink += spin(hot, t + 10_000_000L);
            sink += spin(warm, t + 16_000_000L);
            sink += reflect(m, t + 20_000_000L);
        }
    }
}
