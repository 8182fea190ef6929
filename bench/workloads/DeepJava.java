import java.io.FileOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/* A service-like JVM with deep Java stacks, for the report-scale benchmark: four threads
 * recurse through eight mutually calling methods to a depth of 30 to 60 frames, chosen
 * per call, so that the profile holds thousands of distinct stacks; the leaves compute,
 * allocate (GC, native frames of libjvm) and write to /dev/null (kernel frames).
 * Usage: java DeepJava SECONDS */
public class DeepJava {
	static volatile long sink;

	static long leafCompute(long x) {
		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005L + 1442695040888963407L;
		return x;
	}

	static long leafAlloc(long x) {
		List<long[]> l = new ArrayList<>();
		for (int i = 0; i < 20; i++)
			l.add(new long[64 + (int) (x & 63)]);
		return l.size() + x;
	}

	static long leafWrite(FileOutputStream out, long x) throws IOException {
		out.write((int) x);
		return x + 1;
	}

	static long step(int k, int depth, long x, FileOutputStream out) throws IOException {
		if (depth == 0) {
			int w = (int) ((x >>> 7) % 10);
			return w < 6 ? leafCompute(x) : w < 9 ? leafAlloc(x) : leafWrite(out, x);
		}
		switch ((int) ((x >>> 13) + k) & 7) {
		case 0: return a0(depth - 1, x * 31 + 1, out);
		case 1: return a1(depth - 1, x * 33 + 3, out);
		case 2: return a2(depth - 1, x * 35 + 5, out);
		case 3: return a3(depth - 1, x * 37 + 7, out);
		case 4: return a4(depth - 1, x * 39 + 9, out);
		case 5: return a5(depth - 1, x * 41 + 11, out);
		case 6: return a6(depth - 1, x * 43 + 13, out);
		default: return a7(depth - 1, x * 45 + 15, out);
		}
	}

	static long a0(int d, long x, FileOutputStream o) throws IOException { return step(0, d, x, o) + 1; }
	static long a1(int d, long x, FileOutputStream o) throws IOException { return step(1, d, x, o) + 1; }
	static long a2(int d, long x, FileOutputStream o) throws IOException { return step(2, d, x, o) + 1; }
	static long a3(int d, long x, FileOutputStream o) throws IOException { return step(3, d, x, o) + 1; }
	static long a4(int d, long x, FileOutputStream o) throws IOException { return step(4, d, x, o) + 1; }
	static long a5(int d, long x, FileOutputStream o) throws IOException { return step(5, d, x, o) + 1; }
	static long a6(int d, long x, FileOutputStream o) throws IOException { return step(6, d, x, o) + 1; }
	static long a7(int d, long x, FileOutputStream o) throws IOException { return step(7, d, x, o) + 1; }

	public static void main(String[] args) throws Exception {
		final long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
		Thread[] t = new Thread[4];
		for (int i = 0; i < t.length; i++) {
			final long seed = i * 7919L + 17;
			t[i] = new Thread(() -> {
				try (FileOutputStream out = new FileOutputStream("/dev/null")) {
					long x = seed;
					while (System.nanoTime() < end) {
						/* 15..30 calls of two frames each (step + aN): 30..60 Java frames. */
						int depth = 15 + (int) ((x >>> 3) % 16);
						x = step(0, depth, x, out) * 2862933555777941757L + 3037000493L;
						sink = x;
					}
				} catch (IOException e) {
					throw new RuntimeException(e);
				}
			}, "deep-" + i);
			t[i].start();
		}
		for (Thread th : t)
			th.join();
	}
}
