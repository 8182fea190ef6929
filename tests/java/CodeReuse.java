// Makes the JIT reuse code addresses on purpose: each generation defines the GenR0000
// template under a new name GenR<N> in a throwaway class loader, runs it until it is
// compiled, drops the loader and calls System.gc(), so the class is unloaded, its code
// freed, and the next generation's code can land on the same addresses.
// Prints "gen N START_NS END_NS HOT_NS" (System.nanoTime() = CLOCK_MONOTONIC on Linux
// HotSpot): HOT is when the first call of the generation's run() returned, after the
// class was defined and its reflective call linked (tens of ms of CPU, and on a loaded
// machine a good part of a generation's wall time).
// Usage: CodeReuse [GENERATIONS [SECONDS_PER_GENERATION]]
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.lang.reflect.Method;

public class CodeReuse {
    static volatile long sink;

    static final class OneShot extends ClassLoader {
        OneShot() { super(CodeReuse.class.getClassLoader()); }
        Class<?> define(String name, byte[] b) { return defineClass(name, b, 0, b.length); }
    }

    static byte[] template() throws Exception {
        try (InputStream in = CodeReuse.class.getResourceAsStream("GenR0000.class")) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            in.transferTo(out);
            return out.toByteArray();
        }
    }

    // Replaces every "GenR0000" in the class bytes (the class name constant and the
    // source file name) with the generation's name of the same length.
    static byte[] rename(byte[] b, String to) {
        byte[] from = "GenR0000".getBytes(), t = to.getBytes();
        byte[] r = b.clone();
        for (int i = 0; i + from.length <= r.length; i++) {
            boolean m = true;
            for (int k = 0; k < from.length && m; k++) m = r[i + k] == from[k];
            if (m) System.arraycopy(t, 0, r, i, t.length);
        }
        return r;
    }

    public static void main(String[] args) throws Exception {
        int gens = args.length > 0 ? Integer.parseInt(args[0]) : 6;
        double secs = args.length > 1 ? Double.parseDouble(args[1]) : 1.5;
        byte[] tpl = template();
        for (int g = 1; g <= gens; g++) {
            String name = String.format("GenR%04d", g);
            long start = System.nanoTime();
            OneShot l = new OneShot();
            Class<?> c = l.define(name, rename(tpl, name));
            Method run = c.getMethod("run", long.class);
            long until = start + (long) (secs * 1e9), hot = 0;
            // Many short calls so run() and step() get normal (not only OSR) compilations.
            while (System.nanoTime() < until) {
                sink += (Long) run.invoke(null, Math.min(until, System.nanoTime() + 2_000_000L));
                if (hot == 0)
                    hot = System.nanoTime();
            }
            long end = System.nanoTime();
            System.out.println("gen " + g + " " + start + " " + end + " " + (hot != 0 ? hot : end));
            System.out.flush();
            run = null; c = null; l = null;
            System.gc();
            System.gc();
        }
    }
}
