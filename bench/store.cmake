# store layer benchmarks (included by bench/CMakeLists.txt when "store" is among TS_LAYERS).
ts_add_bench(store_ingest_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/store_ingest_bench.cpp LIBS ts_store)
