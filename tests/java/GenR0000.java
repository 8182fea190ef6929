// The template class CodeReuse loads once per generation under the name GenR<NNNN>
// (same length, patched in the class bytes), so each generation's compiled code carries
// its generation in the method name.
public class GenR0000 {
    static long step(long x) {
        for (int i = 0; i < 64; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= (x >>> 29) + i;
        }
        return x;
    }

    public static long run(long until) {
        long x = 7;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 1000; i++)
                x = step(x);
        }
        return x;
    }
}
