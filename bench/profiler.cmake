ts_add_bench(profiler_tracer_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/profiler_tracer_bench.cpp LIBS ts_profiler)
