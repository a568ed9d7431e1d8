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
