import java.util.concurrent.locks.LockSupport;

/* Off-CPU walk cost at a known depth (issue 37): THREADS threads each park PARKS times
 * for 100 us, 50 distinct Java methods deep (m0 .. m49; run with
 * -XX:CompileCommand=dontinline,ParkDeep::* so that each is a physical frame once
 * compiled), so every switch-out walks a Java stack of 50 frames plus the JDK's park
 * path and the thread's root. Fixed work: the run ends when every thread has parked
 * PARKS times. Generated once (bench/cost-breakdown.sh runs it); the methods differ so
 * that no walk is shortened by a recursion's repeated return address.
 * Usage: java -XX:CompileCommand=dontinline,ParkDeep::* ParkDeep THREADS PARKS */
public class ParkDeep {
	static final long PARK_NS = 100_000;
	static volatile long sink;

	static long m0(long x) {
		return m1(x + 0) ^ 0;
	}

	static long m1(long x) {
		return m2(x + 1) ^ 1;
	}

	static long m2(long x) {
		return m3(x + 2) ^ 2;
	}

	static long m3(long x) {
		return m4(x + 3) ^ 3;
	}

	static long m4(long x) {
		return m5(x + 4) ^ 4;
	}

	static long m5(long x) {
		return m6(x + 5) ^ 5;
	}

	static long m6(long x) {
		return m7(x + 6) ^ 6;
	}

	static long m7(long x) {
		return m8(x + 7) ^ 7;
	}

	static long m8(long x) {
		return m9(x + 8) ^ 8;
	}

	static long m9(long x) {
		return m10(x + 9) ^ 9;
	}

	static long m10(long x) {
		return m11(x + 10) ^ 10;
	}

	static long m11(long x) {
		return m12(x + 11) ^ 11;
	}

	static long m12(long x) {
		return m13(x + 12) ^ 12;
	}

	static long m13(long x) {
		return m14(x + 13) ^ 13;
	}

	static long m14(long x) {
		return m15(x + 14) ^ 14;
	}

	static long m15(long x) {
		return m16(x + 15) ^ 15;
	}

	static long m16(long x) {
		return m17(x + 16) ^ 16;
	}

	static long m17(long x) {
		return m18(x + 17) ^ 17;
	}

	static long m18(long x) {
		return m19(x + 18) ^ 18;
	}

	static long m19(long x) {
		return m20(x + 19) ^ 19;
	}

	static long m20(long x) {
		return m21(x + 20) ^ 20;
	}

	static long m21(long x) {
		return m22(x + 21) ^ 21;
	}

	static long m22(long x) {
		return m23(x + 22) ^ 22;
	}

	static long m23(long x) {
		return m24(x + 23) ^ 23;
	}

	static long m24(long x) {
		return m25(x + 24) ^ 24;
	}

	static long m25(long x) {
		return m26(x + 25) ^ 25;
	}

	static long m26(long x) {
		return m27(x + 26) ^ 26;
	}

	static long m27(long x) {
		return m28(x + 27) ^ 27;
	}

	static long m28(long x) {
		return m29(x + 28) ^ 28;
	}

	static long m29(long x) {
		return m30(x + 29) ^ 29;
	}

	static long m30(long x) {
		return m31(x + 30) ^ 30;
	}

	static long m31(long x) {
		return m32(x + 31) ^ 31;
	}

	static long m32(long x) {
		return m33(x + 32) ^ 32;
	}

	static long m33(long x) {
		return m34(x + 33) ^ 33;
	}

	static long m34(long x) {
		return m35(x + 34) ^ 34;
	}

	static long m35(long x) {
		return m36(x + 35) ^ 35;
	}

	static long m36(long x) {
		return m37(x + 36) ^ 36;
	}

	static long m37(long x) {
		return m38(x + 37) ^ 37;
	}

	static long m38(long x) {
		return m39(x + 38) ^ 38;
	}

	static long m39(long x) {
		return m40(x + 39) ^ 39;
	}

	static long m40(long x) {
		return m41(x + 40) ^ 40;
	}

	static long m41(long x) {
		return m42(x + 41) ^ 41;
	}

	static long m42(long x) {
		return m43(x + 42) ^ 42;
	}

	static long m43(long x) {
		return m44(x + 43) ^ 43;
	}

	static long m44(long x) {
		return m45(x + 44) ^ 44;
	}

	static long m45(long x) {
		return m46(x + 45) ^ 45;
	}

	static long m46(long x) {
		return m47(x + 46) ^ 46;
	}

	static long m47(long x) {
		return m48(x + 47) ^ 47;
	}

	static long m48(long x) {
		return m49(x + 48) ^ 48;
	}

	static long m49(long x) {
		LockSupport.parkNanos(PARK_NS);
		return x + 1;
	}

	public static void main(String[] args) throws InterruptedException {
		int threads = Integer.parseInt(args[0]);
		long parks = Long.parseLong(args[1]);
		Thread[] t = new Thread[threads];
		for (int i = 0; i < threads; i++) {
			t[i] = new Thread(() -> {
				for (long k = 0; k < parks; k++)
					sink += m0(k);
			}, "park-deep-" + i);
			t[i].start();
		}
		for (Thread x : t)
			x.join();
	}
}
