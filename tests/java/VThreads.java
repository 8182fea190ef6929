// Virtual threads with a known split, for test-vthreads (issue 21, item 3). Four
// virtual threads each alternate about 3 ms of computing in computeStep() with a 5 ms
// Thread.sleep from napStep(), for SECONDS (args[0], default 4). Compiled with --release
// 17 like the other workloads, so the JDK 21 API is reached by reflection; on a JDK
// without virtual threads it prints "no virtual threads" and exits 3. Prints "ready"
// when the threads start and, at the end, "slept_ms=N": the virtual threads' own
// measured time inside napStep(), summed. With "socket" as args[1] (issue 33) each virtual
// thread instead reads a byte from a loopback socket in sockStep(), which a platform
// thread writes every 5 ms: a virtual thread's NIO wait, parked in sun.nio.ch.Poller; it
// prints "read_ms=N", the time spent inside sockStep(), summed.
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

public class VThreads {
    static volatile long sink;
    static final AtomicLong slept = new AtomicLong();
    static volatile long deadline;

    static long computeStep(long x) {
        long end = System.nanoTime() + 3_000_000;
        while (System.nanoTime() < end)
            for (int i = 0; i < 200; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                x ^= x >>> 29;
            }
        return x;
    }

    static void napStep() throws InterruptedException {
        long t = System.nanoTime();
        Thread.sleep(5);
        slept.addAndGet(System.nanoTime() - t);
    }

    static ServerSocket server;

    static int sockStep(InputStream in) throws java.io.IOException {
        long t = System.nanoTime();
        int b = in.read();
        slept.addAndGet(System.nanoTime() - t);
        return b;
    }

    static void sockBody() {
        try (Socket s = new Socket(server.getInetAddress(), server.getLocalPort())) {
            InputStream in = s.getInputStream();
            while (System.nanoTime() < deadline && sockStep(in) >= 0)
                ;
        } catch (java.io.IOException e) {
            throw new RuntimeException(e);
        }
    }

    /* Accepts n connections, then writes a byte to each every 5 ms until the deadline. */
    static void serve(int n) {
        List<OutputStream> outs = new ArrayList<>();
        List<Socket> conns = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Socket c = server.accept();
                conns.add(c);
                outs.add(c.getOutputStream());
            }
            while (System.nanoTime() < deadline) {
                Thread.sleep(5);
                for (OutputStream o : outs)
                    o.write(1);
            }
            for (Socket c : conns)
                c.close();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static void body() {
        long x = 1;
        try {
            while (System.nanoTime() < deadline) {
                x = computeStep(x);
                napStep();
            }
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
        sink += x;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 4;
        Method ofVirtual;
        try {
            ofVirtual = Thread.class.getMethod("ofVirtual");
        } catch (NoSuchMethodException e) {
            System.out.println("no virtual threads");
            System.exit(3);
            return;
        }
        Object builder = ofVirtual.invoke(null);
        Method start = Class.forName("java.lang.Thread$Builder").getMethod("start", Runnable.class);
        boolean socket = args.length > 1 && args[1].equals("socket");
        deadline = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] ts = new Thread[4];
        Thread writer = null;
        if (socket) {
            server = new ServerSocket(0, 8, InetAddress.getLoopbackAddress());
            writer = new Thread(() -> serve(ts.length), "socket-writer");
            writer.start();
        }
        for (int i = 0; i < ts.length; i++)
            ts[i] = (Thread) start.invoke(builder, socket ? (Runnable) VThreads::sockBody : (Runnable) VThreads::body);
        System.out.println("ready");
        System.out.flush();
        for (Thread t : ts)
            t.join();
        if (writer != null)
            writer.join();
        System.out.println((socket ? "read_ms=" : "slept_ms=") + slept.get() / 1_000_000);
    }
}
