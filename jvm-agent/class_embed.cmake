# cmake -DIN=ParkHook.class -DOUT=park_hook_class.c -P class_embed.cmake
# Turns the agent's helper class (ParkHook.java, compiled by javac) into a C array with
# its length, for JNI DefineClass (jvm-agent/locks.c).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* Generated from jvm-agent/ParkHook.java by class_embed.cmake; do not edit. */\n"
  "extern const unsigned char vp_park_hook_class[];\nextern const unsigned long vp_park_hook_class_len;\n"
  "const unsigned char vp_park_hook_class[] = {\n${bytes} };\nconst unsigned long vp_park_hook_class_len = ${n};\n")
