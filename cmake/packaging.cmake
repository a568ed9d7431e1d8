# `make package`: build/floodgate_<version>_<arch>.deb, the `server` install component.
#
# CPack's DEB generator rather than dpkg-buildpackage: it packages the same install() rules
# a `cmake --install` runs (no second list of files in debian/*.install to keep in step),
# needs no debian/ tree, and still does what a Debian package must: Depends computed from
# the binary's shared libraries by dpkg-shlibdeps (CPACK_DEBIAN_PACKAGE_SHLIBDEPS), the
# config marked as a conffile and the maintainer scripts that create and remove the
# system user (CPACK_DEBIAN_..._CONTROL_EXTRA). Only the `server` component is packaged:
# the binary, its unit and config, not the static library and headers.
#
# The unit and the config install to absolute paths (/lib/systemd/system, /etc/floodgate)
# that only the package wants, so they are EXCLUDE_FROM_ALL: a plain `cmake --install
# --prefix DIR` (examples/embed's test) never writes to /etc.
set(FLOODGATE_SYSTEMD_UNIT_DIR /lib/systemd/system CACHE PATH
    "Where the .deb puts floodgate.service (Debian 12: /lib/systemd/system)")
install(FILES packaging/floodgate.service DESTINATION ${FLOODGATE_SYSTEMD_UNIT_DIR}
  COMPONENT server EXCLUDE_FROM_ALL)
install(FILES packaging/floodgate.yaml DESTINATION /etc/floodgate
  COMPONENT server EXCLUDE_FROM_ALL)
install(FILES README.md docs/service.md docs/envoy.md DESTINATION share/doc/floodgate
  COMPONENT server EXCLUDE_FROM_ALL)

execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE deb_arch
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT deb_arch)
  set(deb_arch amd64)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME floodgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed rate limiter (HTTP service, Envoy RLS)")
set(CPACK_PACKAGE_DESCRIPTION
    "floodgate decides rate limits for HTTP APIs and Envoy's rate limit service, in memory
or shared through Redis (single, Cluster, Sentinel, TLS). The package runs it under
systemd as the floodgate system user with /etc/floodgate/floodgate.yaml.")
set(CPACK_PACKAGE_CONTACT "floodgate maintainers <floodgate@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the RelWithDebInfo binary's debug info is most of its size
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME floodgate)
set(CPACK_DEBIAN_SERVER_FILE_NAME floodgate_${PROJECT_VERSION}_${deb_arch}.deb)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${deb_arch})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# postinst's adduser; the shared libraries' packages are added to this by dpkg-shlibdeps.
# tzdata: the zones of calendar windows (tz=ZONE), read by abseil from /usr/share/zoneinfo.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, tzdata")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_SOURCE_DIR}/packaging/deb/conffiles
    ${CMAKE_CURRENT_SOURCE_DIR}/packaging/deb/postinst
    ${CMAKE_CURRENT_SOURCE_DIR}/packaging/deb/prerm
    ${CMAKE_CURRENT_SOURCE_DIR}/packaging/deb/postrm)
include(CPack)
