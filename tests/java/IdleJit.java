/* test-agent-walk-idle: a JVM that compiles one method while nearly idle. It sleeps
 * first (start-up's compiles and walks settle), then calls idleHot often enough for a
 * C1 compile and not for C2 (a few ms of CPU in all), prints "burst", and sleeps
 * args[0] seconds: the code installed then is found by a walk the JVM's CPU did not
 * pay for (the agent's SCAN_MAX_MS bound), or not at all until the JVM ends. */
public class IdleJit {
    static int idleHot(int x) {
        int s = 0;
        for (int k = 0; k < 50; k++)
            s += (k * 31) ^ (s >>> 3) ^ x;
        return s;
    }

    public static void main(String[] args) throws Exception {
        Thread.sleep(1500);
        long sum = 0;
        for (int i = 0; i < 1500; i++)
            sum += idleHot(i);
        System.out.println("burst " + sum);
        System.out.flush();
        Thread.sleep(Long.parseLong(args[0]) * 1000);
    }
}
