# Generates a C++ source holding the Lua scripts as string constants, so the binary
# carries its scripts (no files to deploy, no version skew). Run at build time.
#   -DOUTPUT=file.cc -DLUA_DIR=dir -DNAMES=common,gcra,...
set(content "// Generated from lua/*.lua by cmake/embed_lua.cmake. Do not edit.\n")
string(APPEND content "#include \"store/redis/lua_sources.h\"\n\nnamespace floodgate::redis::lua {\n")
string(REPLACE "," ";" NAMES "${NAMES}")
foreach(name IN LISTS NAMES)
  file(READ "${LUA_DIR}/${name}.lua" body)
  string(APPEND content "const std::string_view k_${name} = R\"FLOODGATE_LUA(${body})FLOODGATE_LUA\";\n")
endforeach()
string(APPEND content "}  // namespace floodgate::redis::lua\n")
file(WRITE "${OUTPUT}.tmp" "${content}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
