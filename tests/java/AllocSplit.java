// Allocations with a known split of bytes (issue 25, record -e alloc): AllocSplit.a
// allocates long[6] and AllocSplit.b double[6], objects of the same size (64 bytes with
// a 16-byte header), three of a's for each of b's: 75% and 25% of the bytes, in two
// classes. The arrays are stored where other code could read them, so that the JIT
// cannot prove they do not escape and remove the allocations. Prints "ready" once it
// allocates. Usage: AllocSplit SECONDS
public class AllocSplit {
    static Object[] keep = new Object[1024];

    static void a(int i) { keep[i & 1023] = new long[6]; }

    static void b(int i) { keep[i & 1023] = new double[6]; }

    public static void main(String[] args) {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        int i = 0;
        System.out.println("ready");   // for attach tests (test-profiles-attach-jvm)
        while (System.nanoTime() < end)
            for (int k = 0; k < 1000; k++, i++) {
                if ((i & 3) != 0)
                    a(i);
                else
                    b(i);
            }
    }
}
