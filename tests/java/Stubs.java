// Time in HotSpot stubs that have no frame of their own, under a known caller (issue 22
// item 2): one worker thread ("stub-worker") alternates megamorphic interface calls (C2
// dispatches them through itable stubs), megamorphic virtual calls (vtable stubs) and
// System.arraycopy of large long[] and byte[] arrays (the arraycopy StubRoutines), each
// under its own caller, until SECONDS pass. Prints "ready" once the worker has warmed up.
// Started without -XX:+PreserveFramePointer, as production JVMs are.
public class Stubs {
    interface Shape { long area(long x); }
    static final class A implements Shape { public long area(long x) { return x + 1; } }
    static final class B implements Shape { public long area(long x) { return x ^ 3; } }
    static final class C implements Shape { public long area(long x) { return x * 5; } }
    static final class D implements Shape { public long area(long x) { return x - 7; } }
    static final class E implements Shape { public long area(long x) { return x >>> 1; } }

    static abstract class Animal { abstract long speak(long x); }
    static final class Cat extends Animal { long speak(long x) { return x + 11; } }
    static final class Dog extends Animal { long speak(long x) { return x ^ 13; } }
    static final class Cow extends Animal { long speak(long x) { return x * 17; } }
    static final class Pig extends Animal { long speak(long x) { return x - 19; } }

    static volatile long sink;

    static long interfaces(Shape[] s, int rounds) {
        long x = 0;
        for (int r = 0; r < rounds; r++)
            for (int i = 0; i < s.length; i++)
                x = s[i].area(x);
        return x;
    }

    static long virtuals(Animal[] a, int rounds) {
        long x = 0;
        for (int r = 0; r < rounds; r++)
            for (int i = 0; i < a.length; i++)
                x = a[i].speak(x);
        return x;
    }

    static long copies(long[] src, long[] dst, byte[] bsrc, byte[] bdst, int rounds) {
        for (int r = 0; r < rounds; r++) {
            System.arraycopy(src, 0, dst, 0, src.length);
            System.arraycopy(bsrc, 0, bdst, 0, bsrc.length);
        }
        return dst[r(dst.length)] + bdst[r(bdst.length)];
    }

    static int r(int n) { return (int) (System.nanoTime() % n); }

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 30;
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        Shape[] shapes = new Shape[1000];
        Animal[] animals = new Animal[1000];
        for (int i = 0; i < shapes.length; i++) {
            switch (i % 5) {
                case 0: shapes[i] = new A(); break;
                case 1: shapes[i] = new B(); break;
                case 2: shapes[i] = new C(); break;
                case 3: shapes[i] = new D(); break;
                default: shapes[i] = new E(); break;
            }
            switch (i % 4) {
                case 0: animals[i] = new Cat(); break;
                case 1: animals[i] = new Dog(); break;
                case 2: animals[i] = new Cow(); break;
                default: animals[i] = new Pig(); break;
            }
        }
        long[] src = new long[1 << 20], dst = new long[1 << 20];
        byte[] bsrc = new byte[4 << 20], bdst = new byte[4 << 20];
        long[] ssrc = new long[16], sdst = new long[16];
        byte[] sbsrc = new byte[16], sbdst = new byte[16];
        Thread t = new Thread(() -> {
            // Warm-up on small arrays first, so that the loop's methods are compiled (and
            // System.arraycopy is the stubs', not the runtime's Copy:: functions) before
            // "ready": with the big arrays alone a loaded VM took longer than the test's
            // wait to compile copies(), which runs only ~50 times a second.
            for (int i = 0; i < 20000; i++)
                sink += copies(ssrc, sdst, sbsrc, sbdst, 1);
            for (int i = 0; i < 100; i++) {
                sink += interfaces(shapes, 1);
                sink += virtuals(animals, 1);
            }
            System.out.println("ready");
            System.out.flush();
            while (System.nanoTime() < end) {
                sink += interfaces(shapes, 200);
                sink += virtuals(animals, 200);
                sink += copies(src, dst, bsrc, bdst, 4);
            }
        }, "stub-worker");
        t.start();
        t.join();
    }
}
