# Envoy's rate limit service messages and xDS's SotW transport (proto/, floodgate's own .proto
# files with Envoy's packages, names and field numbers), envoyproxy/ratelimit's xDS resource,
# and gRPC's health protocol, compiled by protoc and
# grpc_cpp_plugin from Debian's protobuf-compiler / protobuf-compiler-grpc into the static
# library floodgate_rls_proto.
find_package(Protobuf REQUIRED)  # CMake's FindProtobuf: libprotobuf and protoc
# Debian's own gRPC CMake package, not pkg-config: grpc++.pc pulls in abseil's hundreds of
# .pc files and CMake runs find_library for each (32 of a configure's 34 CPU-s); this is
# under one second.
find_package(gRPC CONFIG REQUIRED)
find_program(FLOODGATE_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(FLOODGATE_PROTO_DIR ${CMAKE_CURRENT_SOURCE_DIR}/proto)
set(FLOODGATE_PROTO_FILES
  envoy/type/v3/ratelimit_unit.proto
  envoy/config/core/v3/base.proto
  envoy/extensions/common/ratelimit/v3/ratelimit.proto
  envoy/service/ratelimit/v3/rls.proto
  grpc/health/v1/health.proto
  google/rpc/status.proto
  envoy/service/discovery/v3/discovery.proto
  ratelimit/config/ratelimit/v3/rls_conf.proto)
set(proto_out ${CMAKE_CURRENT_BINARY_DIR}/generated/proto)
file(MAKE_DIRECTORY ${proto_out})
set(proto_sources)
set(FLOODGATE_PROTO_FILES_ABSOLUTE)
foreach(file IN LISTS FLOODGATE_PROTO_FILES)
  string(REGEX REPLACE "\\.proto$" "" stem ${file})
  list(APPEND proto_sources ${proto_out}/${stem}.pb.cc ${proto_out}/${stem}.pb.h)
  list(APPEND FLOODGATE_PROTO_FILES_ABSOLUTE ${FLOODGATE_PROTO_DIR}/${file})
endforeach()
# Three files declare an RPC service: the rate limit service, gRPC's health protocol
# (grpc.health.v1, served by floodgate on its own completion queues: server/rls/grpc_server),
# and xDS's aggregated discovery (the config client of server/rls/xds_client).
foreach(stem envoy/service/ratelimit/v3/rls grpc/health/v1/health
        envoy/service/discovery/v3/discovery)
  list(APPEND proto_sources ${proto_out}/${stem}.grpc.pb.cc ${proto_out}/${stem}.grpc.pb.h)
endforeach()
add_custom_command(
  OUTPUT ${proto_sources}
  COMMAND protobuf::protoc --proto_path=${FLOODGATE_PROTO_DIR} --cpp_out=${proto_out}
          --grpc_out=${proto_out} --plugin=protoc-gen-grpc=${FLOODGATE_GRPC_CPP_PLUGIN}
          ${FLOODGATE_PROTO_FILES}
  DEPENDS ${FLOODGATE_PROTO_FILES_ABSOLUTE}
  COMMENT "protoc: Envoy's rate limit service and gRPC health (proto/)" VERBATIM)
add_library(floodgate_rls_proto STATIC ${proto_sources})
# Generated code: built without our -Werror.
target_include_directories(floodgate_rls_proto SYSTEM PUBLIC ${proto_out})
target_link_libraries(floodgate_rls_proto PUBLIC protobuf::libprotobuf gRPC::grpc++)
set_target_properties(floodgate_rls_proto PROPERTIES POSITION_INDEPENDENT_CODE ON)
floodgate_pch(floodgate_rls_proto <google/protobuf/message.h>
  <google/protobuf/generated_message_reflection.h> <grpcpp/grpcpp.h>)
if(FLOODGATE_SANITIZE)
  # protoc's and gRPC's generated code at -O0 in the sanitizer trees, like the tests' own
  # code: still instrumented, half the compile time (health.grpc.pb.cc under ASan+UBSan
  # 7.8 -> 3.1 CPU-s).
  target_compile_options(floodgate_rls_proto PRIVATE $<$<CONFIG:RelWithDebInfo,Release>:-O0>)
endif()
