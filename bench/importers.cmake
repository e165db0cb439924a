# importers benchmarks (included by bench/CMakeLists.txt when "importers" is among TS_LAYERS).
# A synthetic PyTorch profiler trace of any size, written as a stream (bench/synthetic_kineto_trace.h).
find_package(ZLIB REQUIRED)
add_library(ts_synthetic_kineto STATIC ${CMAKE_CURRENT_SOURCE_DIR}/synthetic_kineto_trace.cpp)
target_include_directories(ts_synthetic_kineto PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_features(ts_synthetic_kineto PUBLIC cxx_std_20)
target_link_libraries(ts_synthetic_kineto PRIVATE fmt::fmt ZLIB::ZLIB ts_warnings)
