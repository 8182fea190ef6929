# bpf_object(NAME SOURCE) compiles SOURCE with clang -target bpf and generates a libbpf
# skeleton; it defines the INTERFACE target NAME_skel that puts NAME.skel.h on the
# include path. vmlinux.h is generated once from the running kernel's BTF.
find_program(BPF_CLANG NAMES clang clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

set(VIPROF_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH "Kernel BTF used to generate vmlinux.h")
set(VMLINUX_DIR ${CMAKE_BINARY_DIR}/vmlinux)
add_custom_command(OUTPUT ${VMLINUX_DIR}/vmlinux.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${VMLINUX_DIR}
  COMMAND ${BPFTOOL} btf dump file ${VIPROF_BTF} format c > ${VMLINUX_DIR}/vmlinux.h
  COMMENT "Generating vmlinux.h from ${VIPROF_BTF}")
add_custom_target(vmlinux_h DEPENDS ${VMLINUX_DIR}/vmlinux.h)

execute_process(COMMAND uname -m OUTPUT_VARIABLE _arch OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_arch STREQUAL "x86_64")
  set(BPF_TARGET_ARCH x86)
elseif(_arch STREQUAL "aarch64")
  set(BPF_TARGET_ARCH arm64)
else()
  set(BPF_TARGET_ARCH ${_arch})
endif()

function(bpf_object name src)
  set(obj ${CMAKE_CURRENT_BINARY_DIR}/${name}.bpf.o)
  set(skel ${CMAKE_CURRENT_BINARY_DIR}/${name}.skel.h)
  add_custom_command(OUTPUT ${obj}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${BPF_TARGET_ARCH}
            -I${VMLINUX_DIR} -I${CMAKE_SOURCE_DIR} -I${CMAKE_CURRENT_SOURCE_DIR}
            -c ${CMAKE_CURRENT_SOURCE_DIR}/${src} -o ${obj}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src} ${VMLINUX_DIR}/vmlinux.h
            ${ARGN}
    COMMENT "BPF ${src}")
  add_custom_command(OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name} > ${skel}
    DEPENDS ${obj}
    COMMENT "BPF skeleton ${name}.skel.h")
  add_custom_target(${name}_skelgen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skelgen)
  target_include_directories(${name}_skel INTERFACE ${CMAKE_CURRENT_BINARY_DIR})
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF PkgConfig::LIBELF PkgConfig::ZLIB)
endfunction()
