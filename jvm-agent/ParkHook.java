// Defined by the agent in the boot class loader (jvm-agent/locks.c) to bind its wrapper
// of jdk.internal.misc.Unsafe.park. HotSpot logs a warning on the JVM's standard output
// when a native method of a platform class is bound again by code outside the boot
// loader (JDK-8238460), and it judges by the Java method that called the native that
// calls RegisterNatives: install() is that method, in the boot loader, so the
// application's output stays its own. Compiled at build time and embedded in the agent.
package viprof.agent;

final class ParkHook {
    private ParkHook() {
    }

    static void install() {
        install0();
    }

    private static native void install0();
}
