# importers benchmarks (included by bench/CMakeLists.txt when "importers" is among TS_LAYERS).
# A synthetic PyTorch profiler trace of any size, written as a stream (bench/synthetic_kineto_trace.h).
find_package(ZLIB REQUIRED)
add_library(ts_synthetic_kineto STATIC ${CMAKE_CURRENT_SOURCE_DIR}/synthetic_kineto_trace.cpp)
target_include_directories(ts_synthetic_kineto PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_features(ts_synthetic_kineto PUBLIC cxx_std_20)
target_link_libraries(ts_synthetic_kineto PRIVATE fmt::fmt ZLIB::ZLIB ts_warnings)

# Issue 42's 2 GB trace: imported by `trainscope import-trace` (time, MB/s, peak RSS under 1 GiB, row
# counts) and opened in the viewer's timeline (time to the first window, peak RSS). Needs the viewer.
if("viewer" IN_LIST TS_LAYERS AND TARGET trainscope)
  find_package(Qt6 REQUIRED COMPONENTS Test)
  add_executable(trace_import_bench ${CMAKE_CURRENT_SOURCE_DIR}/trace_import_bench.cpp)
  target_link_libraries(trace_import_bench PRIVATE ts_synthetic_kineto ts_viewer Qt6::Test SQLite3::SQLite3 fmt::fmt
                        ts_warnings)
  target_compile_definitions(trace_import_bench PRIVATE TRAINSCOPE_BIN="$<TARGET_FILE:trainscope>")
  add_dependencies(trace_import_bench trainscope)
  # The benchmark itself tested on a 20 MB trace: the same steps and checks, in seconds.
  add_test(NAME Bench.TraceImport20MB COMMAND trace_import_bench --bytes 20000000)
  set_tests_properties(Bench.TraceImport20MB PROPERTIES ENVIRONMENT "QT_QPA_PLATFORM=offscreen"
                       LABELS importers TIMEOUT 300 SKIP_RETURN_CODE 77)
  # The measurement (minutes, 2 GB and more of disk): not in the default test preset.
  add_test(NAME Bench.TraceImport2GB COMMAND trace_import_bench --bytes 2000000000)
  set_tests_properties(Bench.TraceImport2GB PROPERTIES ENVIRONMENT "QT_QPA_PLATFORM=offscreen"
                       LABELS measurement TIMEOUT 3600 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endif()
