# cmake -DIN=flame.html -DOUT=flame_html.c -P flame_embed.cmake
# Turns the flame graph template into a NUL-terminated C array, so that the template
# stays an ordinary HTML file that can be edited and opened on its own.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* Generated from report/flame.html by flame_embed.cmake; do not edit. */\n"
  "extern const char vp_flame_html[];\nconst char vp_flame_html[] = {\n${bytes}0x00 };\n")
