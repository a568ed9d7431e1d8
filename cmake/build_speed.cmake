# Build-time levers that change no behaviour: the lld linker, ccache when present, unity
# batches for the libraries and tests. What each saved: the comments beside them, and README "Testing".

include(CheckLinkerFlag)

# lld links our test executables (static libfloodgate, gRPC, debug info) 3-5x faster than
# GNU ld; used when the compiler can drive it, else the default linker stays.
check_linker_flag(CXX -fuse-ld=lld FLOODGATE_HAS_LLD)
if(FLOODGATE_HAS_LLD)
  add_link_options(-fuse-ld=lld)
endif()

# ccache only when installed and not already chosen by the caller: a fresh clone builds
# without it, a developer's rebuild of an unchanged file costs a cache lookup. The
# sloppiness lets a second checkout of the same sources (another worktree) hit the cache.
find_program(FLOODGATE_CCACHE ccache)
if(FLOODGATE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=time_macros,include_file_mtime,include_file_ctime ${FLOODGATE_CCACHE})
endif()

# Unity batches: a batch of .cc files compiled as one translation unit parses the heavy
# headers (Asio, Beast, gRPC, nlohmann) once. Batches stay small, so touching one file
# recompiles a few, not a whole library.
option(FLOODGATE_UNITY "Compile sources in small unity batches" ON)
function(floodgate_unity target batch_size)
  if(FLOODGATE_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch_size})
  endif()
endfunction()

# Precompiled headers: the system headers most of a target's units include (the standard
# library, fmt, abseil, Asio, Beast, gRPC, gtest), parsed once per target instead of once per
# unity batch. Measured 2026-12-02, CPU-s per tree: TSan 585 -> 447 (floodgate_server 153 ->
# 97, rls_test 78 -> 46, the generated protobuf code 39 -> 18), the default tree 953 -> 899.
# GCC's precompiled headers are larger and slower to build than clang's (14-32 s each, with
# debug info), so under GCC only the targets that gain from one get one.
# Only headers from outside the project: a change of ours never rebuilds a PCH.
option(FLOODGATE_PCH "Precompile the system headers of each target" ON)
set(FLOODGATE_PCH_STD <algorithm> <array> <atomic> <chrono> <cstdint> <functional> <map>
    <memory> <mutex> <optional> <string> <string_view> <thread> <utility> <variant> <vector>)
function(floodgate_pch target)
  if(FLOODGATE_PCH)
    target_precompile_headers(${target} PRIVATE ${FLOODGATE_PCH_STD} ${ARGN})
  endif()
endfunction()
# Under GCC in an optimised build the CLI's few units lost more to their PCH than it saved
# (130 -> 142 CPU-s): targets that call this have a PCH everywhere but there.
function(floodgate_pch_unless_gcc_optimised target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT FLOODGATE_SANITIZE)
    return()
  endif()
  floodgate_pch(${target} ${ARGN})
endfunction()
# A target with the same compile flags as `owner` uses owner's PCH (the test binaries share
# floodgate_conformance's); CMake adds -Winvalid-pch, so with -Werror a mismatch stops the
# build rather than silently parsing everything again.
function(floodgate_pch_from target owner)
  if(FLOODGATE_PCH)
    set_target_properties(${target} PROPERTIES PRECOMPILE_HEADERS_REUSE_FROM ${owner})
  endif()
endfunction()
