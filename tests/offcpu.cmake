# Off-CPU time, exact steal and the wall view (record --off-cpu, report --wall).
add_executable(offcpu-fixture fixtures/offcpu/offcpu-fixture.c)
target_compile_options(offcpu-fixture PRIVATE "SHELL:-O1 -fno-omit-frame-pointer")
target_link_libraries(offcpu-fixture PRIVATE Threads::Threads)
foreach(scenario split compete steal)
  viprof_test(test-offcpu-${scenario} SOURCES test-offcpu.c LIBS vp_report ARGS ${scenario} TIMEOUT 120 LABELS live)
  target_compile_definitions(test-offcpu-${scenario} PRIVATE VIPROF_BIN="$<TARGET_FILE:viprof>"
                             OFFCPU_FIXTURE="$<TARGET_FILE:offcpu-fixture>")
  add_dependencies(test-offcpu-${scenario} viprof offcpu-fixture)
endforeach()
viprof_test(test-wall SOURCES test-wall.c LIBS vp_report LABELS unit)
# The sampler and the switch tracer in one -p recording follow one set of processes
# (one shared tracked map): a child forked after the start, and a process added later.
viprof_test(test-offcpu-follow SOURCES test-offcpu-follow.c LIBS vp_sampler PkgConfig::LIBBPF TIMEOUT 60 LABELS live)
# The tracer's per-thread switches against the kernel's count, for a thread that ends
# during the recording and one alive at its end (sums in task storage, flush_thread).
viprof_test(test-sched-switches SOURCES test-sched-switches.c LIBS vp_sampler PkgConfig::LIBBPF Threads::Threads
            ARGS off TIMEOUT 60 LABELS live)
add_test(NAME test-sched-switches-offcpu COMMAND test-sched-switches on)
set_tests_properties(test-sched-switches-offcpu PROPERTIES TIMEOUT 60 LABELS live SKIP_RETURN_CODE 77)
# Steal charged where the steal clock moves (per stack, per thread, idle), with the run
# queue's clock read in its place (VIPROF_DEBUG_STEAL_CLOCK=rq): this VM's never moves.
add_test(NAME test-sched-switches-steal COMMAND test-sched-switches steal-off)
add_test(NAME test-sched-switches-steal-offcpu COMMAND test-sched-switches steal-on)
set_tests_properties(test-sched-switches-steal test-sched-switches-steal-offcpu PROPERTIES TIMEOUT 60 LABELS live
                     SKIP_RETURN_CODE 77)
# Whole stacks at switch-out (the sampler's walker), wait states, units.
add_executable(nap-fixture fixtures/offcpu/nap-fixture.c)
target_compile_options(nap-fixture PRIVATE "SHELL:-O1 -fomit-frame-pointer")
# One binary: "nap" (the C fixture) and, through viprof_jvm_test, WaitSplit on JDK 17
# (test-offcpu-walk) and Temurin 25 (test-offcpu-walk-jdk25).
viprof_jvm_test(test-offcpu-walk 120 vp_report vp_common LABELS live jvm)
target_compile_definitions(test-offcpu-walk PRIVATE NAP_FIXTURE="$<TARGET_FILE:nap-fixture>")
add_dependencies(test-offcpu-walk nap-fixture)
add_test(NAME test-offcpu-walk-nap COMMAND test-offcpu-walk nap WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-offcpu-walk-nap PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
# Issue 37: a thread's last walk is reused only while every word it read is unchanged:
# the same leaf under two callers that differ nine frames up keeps its 3:1 split.
add_executable(chain-fixture fixtures/offcpu/chain-fixture.c)
target_compile_options(chain-fixture PRIVATE "SHELL:-O1 -fomit-frame-pointer")
target_compile_definitions(test-offcpu-walk PRIVATE CHAIN_FIXTURE="$<TARGET_FILE:chain-fixture>")
add_dependencies(test-offcpu-walk chain-fixture)
add_test(NAME test-offcpu-walk-reuse COMMAND test-offcpu-walk chain WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-offcpu-walk-reuse PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
# A saved rbp joins the reuse log only when a step uses it (walker.bpf.h read_fp): two
# callers told apart by that rbp alone, their stale words left in place, keep the split.
add_executable(fpchain-fixture fixtures/offcpu/fpchain-fixture.c)
target_compile_options(fpchain-fixture PRIVATE "SHELL:-O1 -fno-omit-frame-pointer")
target_compile_definitions(test-offcpu-walk PRIVATE FPCHAIN_FIXTURE="$<TARGET_FILE:fpchain-fixture>")
add_dependencies(test-offcpu-walk fpchain-fixture)
add_test(NAME test-offcpu-walk-reuse-fp COMMAND test-offcpu-walk fpchain WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-offcpu-walk-reuse-fp PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS live)
# Issue 21 item 3: virtual threads. The index of the agent's mount/unmount records,
# without a JVM (unit), and a live run on Temurin 25 (JDK 17 has no virtual threads:
# one test, skipped where that JDK is absent).
viprof_test(test-vthreads-index SOURCES test-vthreads-index.c LIBS vp_report LABELS unit)
viprof_test(test-vthreads-jvm SOURCES test-vthreads-jvm.c LIBS vp_report vp_maps vp_recorder TIMEOUT 120 LABELS live jvm)
target_compile_definitions(test-vthreads-jvm PRIVATE VIPROF_AGENT_SO="${CMAKE_BINARY_DIR}/jvm-agent/libviprof-jvmti.so"
  VIPROF_JAVA_CLASSES="${VIPROF_JAVA_CLASSES}" VIPROF_JDK17_HOME="${VIPROF_JDK_HOME}"
  VIPROF_JDK25_HOME="${VIPROF_JDK25_HOME}" VIPROF_BIN="$<TARGET_FILE:viprof>")
add_dependencies(test-vthreads-jvm viprof-jvmti java-fixtures viprof)
# Issue 33: a virtual thread's socket read (NIO's Poller) is an io wait (root, BPF, JDK 25).
add_test(NAME test-vthreads-jvm-socket COMMAND test-vthreads-jvm socket WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-vthreads-jvm-socket PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "live;jvm")
viprof_test(test-vthreads-session SOURCES test-vthreads-session.c LIBS vp_report LABELS unit)
# Issue 32 item 2: an attached JVM (-p) whose threads wait long: every blocked interval
# under its Java caller, and each thread's wall equal to the recording's length.
viprof_jvm_test(test-offcpu-attach 180 vp_report vp_common LABELS live jvm)
# Issue 32 item 4: a thread sleeping 1000 calls deep; its blocked time reaches main.
viprof_jvm_test(test-offcpu-deep 180 vp_report vp_common LABELS live jvm)
# Issue 33 items 1, 2, 6: --wall rows name each thread's Java method and wait kind
# (WaitMix "mix", launched and attached with -p), JVM-internal waits are idle, not locks (WaitMix "calm": <= 5% lock),
# a launched JVM's report has no "in no recorded mapping" warning, and a plain recording
# of one (no -g) no warning at all.
viprof_jvm_test(test-wall-jvm 180 vp_report vp_common LABELS live jvm SCENARIOS mix attach calm plain)
# Issue 33 item 5: one time zero (when sampling started) for every view, and waits spread
# over their interval: the rule and the strip's data (unit); offcpu-fixture's phases at
# their offsets in the HTML strip and in report --time (live).
viprof_test(test-timeaxis SOURCES test-timeaxis.c LIBS vp_report LABELS unit)
add_test(NAME test-timeaxis-live COMMAND test-timeaxis live $<TARGET_FILE:viprof> $<TARGET_FILE:offcpu-fixture>
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test-timeaxis-live PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS live)
add_dependencies(test-timeaxis viprof offcpu-fixture)
