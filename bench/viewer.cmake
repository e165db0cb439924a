# viewer benchmarks (included by bench/CMakeLists.txt when "viewer" is among TS_LAYERS).
add_executable(timeline_view_bench ${CMAKE_CURRENT_SOURCE_DIR}/timeline_view_bench.cpp)
set_target_properties(timeline_view_bench PROPERTIES AUTOMOC ON)
find_package(Qt6 REQUIRED COMPONENTS Test)
target_link_libraries(timeline_view_bench PRIVATE ts_viewer Qt6::Test fmt::fmt ts_warnings)
