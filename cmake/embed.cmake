# cmake -DIN=file -DOUT=file.cpp -DNAME=symbol -P embed.cmake: the bytes of IN as a C++ array.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "// Generated from ${IN} at build time.\nextern const unsigned char ${NAME}[] = {\n${bytes}};\nextern const unsigned long ${NAME}_len = ${len};\n")
