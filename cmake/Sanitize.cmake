# Sanitizer and fuzzing builds (scripts/test.sh --sanitize, scripts/fuzz.sh): every C
# target instrumented with ASan and UBSan; the fuzz targets in fuzz/ also need clang's
# libFuzzer (VIPROF_FUZZ).
option(VIPROF_SANITIZE "build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(VIPROF_FUZZ "build the libFuzzer targets in fuzz/ (clang)" OFF)
if(VIPROF_SANITIZE OR VIPROF_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    # clang links its sanitizer runtime statically into executables only, so a shared
    # library linked with --no-undefined (the JVM agent, libviprof-counters) fails to
    # link. The shared runtime serves both; the rpath finds it outside ld.so's path.
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libclang_rt.asan-x86_64.so
                    OUTPUT_VARIABLE _vp_asan_so OUTPUT_STRIP_TRAILING_WHITESPACE)
    get_filename_component(_vp_asan_dir "${_vp_asan_so}" DIRECTORY)
    add_link_options(-shared-libsan "-Wl,-rpath,${_vp_asan_dir}")
  endif()
endif()
if(VIPROF_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
