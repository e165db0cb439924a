# The git revision is recorded in every run; it is read at configure time and refreshed on each build.
find_package(Git QUIET)
set(TS_GIT_REVISION_FILE ${PROJECT_BINARY_DIR}/generated/ts_git_revision.h)
add_custom_target(ts_git_revision_header
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${TS_GIT_REVISION_FILE} -DGIT=${GIT_EXECUTABLE}
          -P ${PROJECT_SOURCE_DIR}/cmake/write_git_revision.cmake
  BYPRODUCTS ${TS_GIT_REVISION_FILE})
